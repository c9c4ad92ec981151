package dockertest

// Program is the source of a small multi-purpose test program, meant for
// NewEnv. Its first argument selects what it does:
//
//	exit N            print "hello stdout"/"hello stderr", exit with code N
//	env K1 K2...      print K=value for each variable, exit 0
//	serve PORT        answer HTTP GET / on PORT with "hello <HOSTNAME>"; exit 0 on SIGTERM
//	run [opts]        print "ready" once its signal handling is set, then wait; options:
//	                    -ignore SIG   ignore SIG (e.g. SIGTERM)
//	                    -exit SIG     exit 0 when SIG arrives (default SIGTERM and SIGINT)
//	                    -code N       exit code used for -exit (default 0)
//	tick MS           print "tick N" every MS milliseconds, forever
//	slow MS CODE      print "ready"; on SIGTERM print "term", take MS
//	                  milliseconds to exit (further SIGTERMs ignored), print
//	                  "bye" and exit CODE
//	log N             print N lines to stdout and N to stderr, then wait
//	oom               wait a second, then allocate and touch memory, 1 MiB
//	                  at a time, forever. The wait is the engine's: the
//	                  containerd shim watches a container's cgroup for OOM
//	                  kills only once the start call returned, so a kill
//	                  inside that window is never reported as one (exit 137,
//	                  OOMKilled false: seen once in a loaded CI run)
//	busy              spin on the CPU until killed
//	cat PATH...       print each file (or "missing PATH"), then "done", and
//	                  wait for SIGTERM
//	ns PATH...        print its pid and ipc namespaces ("pid=pid:[N]"), its
//	                  effective capabilities ("capeff=HEX") and, for each
//	                  PATH, "dev PATH=ok" or "dev PATH=missing"; then
//	                  "done", and wait for SIGTERM
const Program = `package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var signals = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP,
	"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGQUIT": syscall.SIGQUIT,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: app MODE ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "exit":
		fmt.Println("hello stdout")
		fmt.Fprintln(os.Stderr, "hello stderr")
		n, _ := strconv.Atoi(args[0])
		os.Exit(n)
	case "env":
		for _, k := range args {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
	case "serve":
		exitOnTerm()
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", host) })
		fmt.Println("serving")
		if err := http.ListenAndServe(":"+args[0], nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "run":
		exitOn := []os.Signal{}
		code := 0
		for i := 0; i+1 < len(args); i += 2 {
			switch args[i] {
			case "-ignore":
				signal.Ignore(signals[args[i+1]])
			case "-exit":
				exitOn = append(exitOn, signals[args[i+1]])
			case "-code":
				code, _ = strconv.Atoi(args[i+1])
			}
		}
		if len(exitOn) == 0 {
			exitOn = []os.Signal{syscall.SIGTERM, syscall.SIGINT}
		}
		c := make(chan os.Signal, 1)
		signal.Notify(c, exitOn...)
		fmt.Println("ready")
		s := <-c
		fmt.Println("got", s)
		os.Exit(code)
	case "tick":
		ms, _ := strconv.Atoi(args[0])
		exitOnTerm()
		for i := 0; ; i++ {
			fmt.Printf("tick %d\n", i)
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
	case "slow":
		ms, _ := strconv.Atoi(args[0])
		code, _ := strconv.Atoi(args[1])
		c := make(chan os.Signal, 4)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		fmt.Println("term")
		time.Sleep(time.Duration(ms) * time.Millisecond)
		fmt.Println("bye")
		os.Exit(code)
	case "log":
		n, _ := strconv.Atoi(args[0])
		for i := 0; i < n; i++ {
			fmt.Printf("out %d\n", i)
			fmt.Fprintf(os.Stderr, "err %d\n", i)
		}
		exitOnTerm()
		for {
			time.Sleep(time.Hour)
		}
	case "oom":
		time.Sleep(time.Second)
		var keep [][]byte
		for {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
	case "cat":
		exitOnTerm()
		for _, p := range args {
			b, err := os.ReadFile(p)
			if err != nil {
				fmt.Println("missing", p)
				continue
			}
			os.Stdout.Write(b)
		}
		fmt.Println("done")
		for {
			time.Sleep(time.Hour)
		}
	case "ns":
		exitOnTerm()
		for _, n := range []string{"pid", "ipc"} {
			l, err := os.Readlink("/proc/self/ns/" + n)
			if err != nil {
				l = err.Error()
			}
			fmt.Printf("%s=%s\n", n, l)
		}
		status, _ := os.ReadFile("/proc/self/status")
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				fmt.Printf("capeff=%s\n", strings.TrimSpace(v))
			}
		}
		for _, p := range args {
			state := "ok"
			if _, err := os.Stat(p); err != nil {
				state = "missing"
			}
			fmt.Printf("dev %s=%s\n", p, state)
		}
		fmt.Println("done")
		for {
			time.Sleep(time.Hour)
		}
	case "busy":
		exitOnTerm()
		x := 0
		for {
			x++
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

// exitOnTerm makes the process exit 0 on SIGTERM or SIGINT from now on
// (the handler is installed before it returns): as PID 1 a process
// without a handler would not die of them.
func exitOnTerm() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-c
		os.Exit(0)
	}()
}
`
