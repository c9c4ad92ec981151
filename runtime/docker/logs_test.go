package docker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/pkg/stdcopy"
)

func TestRotatingFileKeepsAtMostNFilesEachWithinMaxBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "task.stdout")
	r, err := OpenRotating(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 39) + "\n" // 40 bytes: two fit in 100, three do not
	for i := 0; i < 9; i++ {
		if _, err := r.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// 9 lines = 5 files of 2 lines each (the last with 1): current, .1, .2 kept.
	cases := []struct {
		name string
		size int64
	}{{"task.stdout", 40}, {"task.stdout.1", 80}, {"task.stdout.2", 80}}
	for _, c := range cases {
		st, err := os.Stat(filepath.Join(dir, c.name))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st.Size() != c.size {
			t.Errorf("%s: size %d, want %d", c.name, st.Size(), c.size)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "task.stdout.3")); !os.IsNotExist(err) {
		t.Errorf("task.stdout.3 exists (err %v): more than 2 rotated files kept", err)
	}

	// Reopening appends to the current file and counts its size.
	r, err = OpenRotating(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != 80 {
		t.Errorf("after reopen: size %d, want 80 (appended)", st.Size())
	}
	if _, err := r.Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != 40 {
		t.Errorf("after reopen and overflow: size %d, want 40 (rotated)", st.Size())
	}
}

// muxed builds an engine log stream: each entry a frame "<ts> <text>".
func muxed(t *testing.T, entries []logEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	out := stdcopy.NewStdWriter(&buf, stdcopy.Stdout)
	errw := stdcopy.NewStdWriter(&buf, stdcopy.Stderr)
	for _, e := range entries {
		w := out
		if e.stderr {
			w = errw
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", e.ts.Format(time.RFC3339Nano), e.text); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

type logEntry struct {
	ts     time.Time
	stderr bool
	text   string
}

func TestCopyLogsSplitsStreamsStripsStampsAndResumesAfterTheRecordedPosition(t *testing.T) {
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	entries := []logEntry{
		{base.Add(1), false, "out 0"},
		{base.Add(2), true, "err 0"},
		{base.Add(3), false, "out 1"},
		{base.Add(4), true, "err 1"},
	}
	posPath := filepath.Join(t.TempDir(), "pos")

	// Control: a fresh position copies everything and records the last stamp.
	pos, err := OpenLogPosition(posPath)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := CopyLogs(bytes.NewReader(muxed(t, entries[:3])), &out, &errb, pos); err != nil {
		t.Fatal(err)
	}
	pos.Close()
	if out.String() != "out 0\nout 1\n" || errb.String() != "err 0\n" {
		t.Fatalf("first copy: stdout %q stderr %q", out.String(), errb.String())
	}

	// A new streamer (as after a restart) gets the whole log again from the
	// engine (`since` is inclusive) and writes only what is new.
	pos, err = OpenLogPosition(posPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pos.Close()
	if !pos.Last().Equal(base.Add(3)) {
		t.Fatalf("recorded position %v, want %v", pos.Last(), base.Add(3))
	}
	if err := CopyLogs(bytes.NewReader(muxed(t, entries)), &out, &errb, pos); err != nil {
		t.Fatal(err)
	}
	if out.String() != "out 0\nout 1\n" || errb.String() != "err 0\nerr 1\n" {
		t.Fatalf("after resume: stdout %q stderr %q (duplicated or lost entries)", out.String(), errb.String())
	}
}
