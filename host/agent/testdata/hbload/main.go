// Command hbload writes the heartbeats of -nodes simulated nodes into the
// nodes bucket of a running `hivelet agent -dev` (its embedded server on
// 127.0.0.1:4222, the token its agent copied to ~/.cache/hivelet/nats) at
// -rate writes a second for -window, after registering them and ten
// seconds of the agent at rest, and prints the agent process's CPU
// (/proc/<pid>/stat) at rest and under the heartbeats: what one daemon
// pays for a fleet's heartbeats, its embedded server's share included.
// BENCHMARKS.md, "Heartbeats not signalled". It lives under testdata: a
// measurement tool, not part of the build.
//
//	hivelet agent -dev & go run ./host/agent/testdata/hbload -pid $!
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
)

func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		panic(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100
}

func main() {
	url := flag.String("url", "nats://127.0.0.1:4222", "")
	n := flag.Int("nodes", 2000, "")
	rate := flag.Int("rate", 1000, "writes per second")
	window := flag.Duration("window", 30*time.Second, "")
	pid := flag.Int("pid", 0, "the agent's pid")
	flag.Parse()
	ctx := context.Background()
	home, _ := os.UserHomeDir()
	tok, err := os.ReadFile(home + "/.cache/hivelet/nats/4222.token")
	if err != nil {
		panic(err)
	}
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{URLs: []string{*url}, FailFast: true, Token: strings.TrimSpace(string(tok))}, nil, nil)
	if err != nil {
		panic(err)
	}
	st, err := fleet.EnsureBuckets(ctx, conn, fleet.Names("hivelet"), fleet.BucketOptions{})
	if err != nil {
		panic(err)
	}
	recs := make([]*model.Node, *n)
	for i := range recs {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		recs[i] = &model.Node{ID: id, Name: fmt.Sprintf("sim-%05d", i), Datacenter: "dc1", NodePool: "default",
			Status: model.NodeStatusReady, Eligibility: model.Eligible, Meta: map[string]string{"rack": "r1"},
			Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "amd64", "os.name": "debian", "unique.hostname": id,
				"cpu.numcores": "2", "memory.totalbytes": "8331399168", "driver.exec": "1", "driver.docker": "1", "hivelet.version": "0.9.0"},
			HeartbeatAt: time.Now().UTC(), RolloutProtocol: 5}
	}
	put := func(i int) {
		recs[i].HeartbeatAt = time.Now().UTC()
		if _, err := st.ForNode(recs[i].ID).PutNode(ctx, recs[i]); err != nil {
			fmt.Fprintln(os.Stderr, "put:", err)
		}
	}
	var wg sync.WaitGroup
	due := make(chan int, 64)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range due {
				put(i)
			}
		}()
	}
	for i := range recs { // register
		due <- i
	}
	time.Sleep(5 * time.Second)
	idle0 := procCPU(*pid)
	time.Sleep(10 * time.Second)
	idle := procCPU(*pid) - idle0
	c0, start := procCPU(*pid), time.Now()
	interval := time.Second / time.Duration(*rate)
	next, tick := 0, start
	for time.Since(start) < *window {
		tick = tick.Add(interval)
		if w := time.Until(tick); w > time.Millisecond {
			time.Sleep(w)
		}
		due <- next
		next = (next + 1) % *n
	}
	close(due)
	wg.Wait()
	el := time.Since(start)
	c := procCPU(*pid) - c0
	fmt.Printf("agent CPU idle %.4f cores; under %d heartbeats/s of %d nodes: %.4f cores; per heartbeat above idle %.1f µs\n",
		idle.Seconds()/10, *rate, *n, c.Seconds()/el.Seconds(), (c.Seconds()/el.Seconds()-idle.Seconds()/10)/float64(*rate)*1e6)
}
