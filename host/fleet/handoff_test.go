package fleet

import (
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// A release hint reaches the node it is addressed to, on its own
// connection, and no other node; a message that is not a hint is dropped;
// a node ID that is no subject token is refused. After stop, nothing more
// is delivered.
func TestAReleaseHintReachesOnlyItsNode(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	a := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	b := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	got := make(chan model.SlotReleased, 4)
	other := make(chan model.SlotReleased, 4)
	stop, err := b.SubscribeReleased("n2", func(r model.SlotReleased) { got <- r })
	if err != nil {
		t.Fatal(err)
	}
	stopOther, err := b.SubscribeReleased("n3", func(r model.SlotReleased) { other <- r })
	if err != nil {
		t.Fatal(err)
	}
	defer stopOther()
	if err := b.Conn().NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	subj, err := a.ReleasedSubject("n2")
	if err != nil || subj != "t.released.n2" {
		t.Fatalf("subject %q, %v: want t.released.n2", subj, err)
	}
	if err := a.Conn().NATS().Publish(subj, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	want := model.SlotReleased{JobID: "web", Key: "slot.default.web.g.0", Holder: "n1", DeploymentID: "d1"}
	if err := a.NotifyReleased("n2", want); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r != want {
			t.Fatalf("received %+v, want %+v", r, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hint never arrived")
	}
	select {
	case r := <-got:
		t.Fatalf("a second delivery (the message that is no hint?): %+v", r)
	case r := <-other:
		t.Fatalf("n3 received n2's hint: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	if err := a.NotifyReleased("bad.node", want); err == nil {
		t.Fatal("a node ID with a dot was accepted as a subject token")
	}
	stop()
	if err := b.Conn().NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := a.NotifyReleased("n2", want); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("delivered after stop: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
}
