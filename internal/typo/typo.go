// Package typo owns the module's one edit distance, the measure behind every
// "did you mean" hint (job-file keys, driver config keys, names an explain
// query does not know). Invariant: the cost is bounded, since a caller may
// pass text it was handed: a string longer than MaxLen is no typo of a
// known name and is compared in constant time (TestDistanceIsBoundedOnLongInput).
// It holds no state and imports only the standard library.
package typo

// MaxLen bounds the strings Distance compares letter by letter: the
// distance costs len(a)×len(b), and no name a hint offers is this long.
const MaxLen = 64

// Far is what Distance answers when either string is longer than MaxLen:
// larger than any threshold a hint uses, so nothing is suggested.
const Far = 1 << 30

// Distance is the Levenshtein distance of a and b, counted in bytes (names
// and keys are ASCII), or Far when either is longer than MaxLen.
func Distance(a, b string) int {
	if len(a) > MaxLen || len(b) > MaxLen {
		return Far
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
