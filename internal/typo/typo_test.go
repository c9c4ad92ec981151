package typo

import (
	"strings"
	"testing"
)

func TestDistanceCountsEdits(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"image", "image", 0},
		{"", "port", 4},
		{"imgae", "image", 2}, // a swap is two edits
		{"imag", "image", 1},
		{"images", "image", 1},
		{"imoge", "image", 1},
		{"kitten", "sitting", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (it is symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestDistanceIsBoundedOnLongInput(t *testing.T) {
	atLimit := strings.Repeat("a", MaxLen)
	// Control: strings of MaxLen bytes are still compared.
	if got := Distance(atLimit, atLimit[1:]); got != 1 {
		t.Fatalf("Distance at MaxLen = %d, want 1", got)
	}
	long := strings.Repeat("a", 1<<20)
	for _, pair := range [][2]string{{long, "image"}, {"image", long}, {atLimit + "a", atLimit}} {
		if got := Distance(pair[0], pair[1]); got != Far {
			t.Errorf("Distance of a %d-byte and a %d-byte string = %d, want Far", len(pair[0]), len(pair[1]), got)
		}
	}
}
