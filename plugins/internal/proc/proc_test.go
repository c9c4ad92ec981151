package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStatCountsFieldsFromTheLastParenthesis(t *testing.T) {
	line := "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 98765 1000 42 18446744073709551615"
	st, err := parseStat(1234, line)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 1234, State: "S", PPID: 1, PGID: 1234, Session: 1234, UTime: 7, STime: 3, StartTicks: 98765, RSSPages: 42}
	if st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	if _, err := parseStat(1, "1 noparen S"); err == nil {
		t.Fatal("a line without a command field parsed")
	}
}

func TestSameIsFalseForAnotherStartTimeAndForAnExitedProcess(t *testing.T) {
	self, err := StartTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !Same(os.Getpid(), self) {
		t.Fatal("this process is not the same as itself")
	}
	if Same(os.Getpid(), self+1) {
		t.Fatal("a different start time was accepted (PID reuse not detected)")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := StartTicks(cmd.Process.Pid); !errors.Is(err, ErrGone) && err == nil {
		t.Fatalf("exited pid: %v", err)
	}
}

func TestWaitExitNoticesANonChildExitQuickly(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Control: while the process runs, WaitExit only returns when ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := WaitExit(ctx, cmd.Process.Pid, start); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a running process: %v", err)
	}
	done := make(chan time.Time, 1)
	go func() { _ = WaitExit(context.Background(), cmd.Process.Pid, start); done <- time.Now() }()
	time.Sleep(20 * time.Millisecond)
	killed := time.Now()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	select {
	case at := <-done:
		if d := at.Sub(killed); d > 500*time.Millisecond {
			t.Fatalf("exit noticed after %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exit not noticed")
	}
}
