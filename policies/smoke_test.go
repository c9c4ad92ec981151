package policies

import (
	"context"
	"os"
	"testing"
	"time"
)

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "hivelet-policy-cache-") }

func TestSmoke(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	m := loadBuiltin(t, e, "percent")
	nodes := genNodes(1000, 3)
	req := canaryReq(nodes, 100, nil)
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		c, err := m.Canary(context.Background(), req)
		t.Log(time.Since(t0), len(c.NodeIDs), c.Reason, err)
	}
	ms := loadBuiltin(t, e, "spread")
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		c, err := ms.Canary(context.Background(), req)
		t.Log(time.Since(t0), len(c.NodeIDs), c.Reason, err)
	}
	md := loadBuiltin(t, e, "default")
	in := genCompletion(10, time.Now())
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		c, err := md.Completion(context.Background(), in)
		t.Log(time.Since(t0), c, err)
	}
	t.Log(faults.all())
}
