package main

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// parallelE2E is how many of the package's parallel tests run at once when
// the command line does not say (-parallel): they are end-to-end tests
// that mostly wait on agents, NATS servers and rollouts (processes of
// their own), so more of them than GOMAXPROCS (go test's default, 2 on the
// CI machine) overlap their waits.
const parallelE2E = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(parallelE2E, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
