package wait

import (
	"context"
	"testing"
	"time"
)

func TestForEndsWithItsContext(t *testing.T) {
	// Control: with a live context the pause runs its course.
	start := time.Now()
	if !For(context.Background(), 20*time.Millisecond) {
		t.Fatal("a pause with a live context reported false")
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("the pause ended after %v, before its 20ms", el)
	}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if For(ended, time.Hour) {
		t.Fatal("a pause under an ended context reported true")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- For(ctx, time.Hour) }()
	cancel()
	if <-done {
		t.Fatal("a pause whose context ended reported true")
	}
}
