package fleet

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hivelet/hivelet/host/wanted"
)

// TestMapSnapshotsEqualTheRecordsAsTheyStoodAndNeverChange drives a builder
// and a plain map with the same random writes (set, delete, update all),
// takes snapshots along the way and checks, after every step, that every
// snapshot taken still holds exactly the records of its moment: a later
// write to the builder never shows through a part a snapshot shares.
func TestMapSnapshotsEqualTheRecordsAsTheyStoodAndNeverChange(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		var b mapBuilder[int]
		ref := map[string]int{}
		type taken struct {
			m    Map[int]
			want map[string]int
		}
		var snaps []taken
		for step := range 600 {
			k := fmt.Sprintf("k%d", r.IntN(300))
			switch op := r.IntN(10); {
			case op < 6:
				v := r.IntN(1000)
				b.Set(k, v)
				ref[k] = v
			case op < 9:
				b.Delete(k)
				delete(ref, k)
			default:
				// Every odd value made even, as forgetApplied does.
				b.Update(func(_ string, v int) (int, bool) { return v &^ 1, v&1 == 1 })
				for k, v := range ref {
					ref[k] = v &^ 1
				}
			}
			if v, ok := b.Get(k); ok != (ref[k] == v && hasKey(ref, k)) || b.Len() != len(ref) {
				t.Fatalf("seed %d step %d: the builder holds %s=%d (%v), %d keys; want %d keys", seed, step, k, v, ok, b.Len(), len(ref))
			}
			if r.IntN(8) == 0 {
				snaps = append(snaps, taken{b.Snapshot(), maps.Clone(ref)})
			}
			for i, s := range snaps {
				if err := sameAs(s.m, s.want); err != nil {
					t.Fatalf("seed %d step %d: snapshot %d: %v", seed, step, i, err)
				}
			}
		}
		if got := b.Snapshot().Clone(); !maps.Equal(got, ref) {
			t.Fatalf("seed %d: the last snapshot holds %d keys, want %d", seed, len(got), len(ref))
		}
	}
}

func hasKey(m map[string]int, k string) bool { _, ok := m[k]; return ok }

// sameAs checks every way of reading m against want.
func sameAs(m Map[int], want map[string]int) error {
	if m.Len() != len(want) {
		return fmt.Errorf("Len %d, want %d", m.Len(), len(want))
	}
	got := map[string]int{}
	for k, v := range m.All() {
		if _, dup := got[k]; dup {
			return fmt.Errorf("key %s yielded twice", k)
		}
		got[k] = v
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("All yields %v, want %v", got, want)
	}
	if c := m.Clone(); !maps.Equal(c, want) {
		return fmt.Errorf("Clone holds %v, want %v", c, want)
	}
	for k, w := range want {
		if v, ok := m.Get(k); !ok || v != w || m.At(k) != w {
			return fmt.Errorf("Get(%s) = %d, %v; want %d", k, v, ok, w)
		}
	}
	if _, ok := m.Get("absent"); ok || m.At("absent") != 0 {
		return fmt.Errorf("an absent key is held")
	}
	return nil
}

// TestASnapshotAfterOneChangeSharesEveryOtherPart is the point of Map: a
// snapshot taken after one write copies the part that write touched and
// shares the others with the snapshot before.
func TestASnapshotAfterOneChangeSharesEveryOtherPart(t *testing.T) {
	var b mapBuilder[int]
	for i := range 1000 {
		b.Set(fmt.Sprintf("k%d", i), i)
	}
	s1 := b.Snapshot()
	b.Set("k17", -1)
	s2 := b.Snapshot()
	s3 := b.Snapshot() // nothing written between: every part shared
	differ := func(a, c Map[int]) (n int) {
		for i := range a.p.part {
			if a.p.id[i] != c.p.id[i] {
				n++
			}
		}
		return n
	}
	if n := differ(s1, s2); n != 1 {
		t.Fatalf("after one write, %d parts differ from the snapshot before, want 1", n)
	}
	if n := differ(s2, s3); n != 0 {
		t.Fatalf("with no write, %d parts differ, want 0", n)
	}
	if s1.At("k17") != 17 || s2.At("k17") != -1 {
		t.Fatalf("k17: %d then %d, want 17 then -1", s1.At("k17"), s2.At("k17"))
	}
	// Control: a write to a key absent from every part touches one part too,
	// and deleting a key not held touches none.
	b.Delete("not-held")
	if n := differ(s3, b.Snapshot()); n != 0 {
		t.Fatalf("deleting a key not held changed %d parts", n)
	}
}

// TestWithAndWithoutLeaveTheirMapAlone: the persistent updates fakes and
// tests build Views with.
func TestWithAndWithoutLeaveTheirMapAlone(t *testing.T) {
	var zero Map[string]
	if zero.Len() != 0 || zero.At("a") != "" || len(zero.Clone()) != 0 {
		t.Fatal("the zero Map is not empty")
	}
	a := zero.With("a", "1")
	ab := a.With("b", "2")
	b := ab.Without("a")
	if err := sameAsStrings(a, map[string]string{"a": "1"}); err != nil {
		t.Fatal("a:", err)
	}
	if err := sameAsStrings(ab, map[string]string{"a": "1", "b": "2"}); err != nil {
		t.Fatal("ab:", err)
	}
	if err := sameAsStrings(b, map[string]string{"b": "2"}); err != nil {
		t.Fatal("b:", err)
	}
	if zero.Len() != 0 {
		t.Fatal("With changed the zero Map")
	}
	m := MapOf(map[string]string{"x": "1", "y": "2"})
	if err := sameAsStrings(m.Without("nothing"), map[string]string{"x": "1", "y": "2"}); err != nil {
		t.Fatal(err)
	}
}

func sameAsStrings(m Map[string], want map[string]string) error {
	if got := m.Clone(); !maps.Equal(got, want) {
		return fmt.Errorf("holds %v, want %v", got, want)
	}
	if m.Len() != len(want) {
		return fmt.Errorf("Len %d, want %d", m.Len(), len(want))
	}
	return nil
}

// TestRejectionsFollowTheChangedPartsOnly: the rejections memo re-walks
// only parts with a new ID, and what it returns stays what a walk of the
// whole map finds.
func TestRejectionsFollowTheChangedPartsOnly(t *testing.T) {
	var b mapBuilder[wanted.JobState]
	for i := range 200 {
		k := fmt.Sprintf("default.j%d", i)
		st := wanted.JobState{Key: k}
		if i%50 == 0 {
			st.Rejection = &wanted.Rejection{Bucket: KindJobs, Key: k, Reason: "bad"}
		}
		b.Set(k, st)
	}
	memo := &rejectionsMemo{}
	check := func(what string) {
		m := b.Snapshot()
		got := memoMapRejections(nil, memo, KindJobs, m)
		want := appendRejectionsOf(nil, m.All())
		key := func(r wanted.Rejection) string { return r.Key + "/" + r.Reason }
		gk, wk := make([]string, 0, len(got)), make([]string, 0, len(want))
		for _, r := range got {
			gk = append(gk, key(r))
		}
		for _, r := range want {
			wk = append(wk, key(r))
		}
		slices.Sort(gk)
		slices.Sort(wk)
		if !slices.Equal(gk, wk) {
			t.Fatalf("%s: memo gives %v, a walk %v", what, gk, wk)
		}
	}
	check("first")
	b.Set("default.j7", wanted.JobState{Key: "default.j7", Rejection: &wanted.Rejection{Bucket: KindJobs, Key: "default.j7", Reason: "new"}})
	check("a rejection added")
	b.Set("default.j0", wanted.JobState{Key: "default.j0"})
	check("a rejection cleared")
	b.Delete("default.j50")
	check("a rejected key deleted")
	check("nothing changed")
}
