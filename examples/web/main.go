// Command web is the program of the example image hivelet/web:local used by
// examples/jobs/web.hcl: a static HTTP server with a /health endpoint. It
// uses only the standard library so it builds as a static binary for a
// FROM scratch image (see build.sh). It logs to stdout, one line at start
// and one per request but the health checks, which is what
// `hivelet alloc logs` prints first.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	listen := flag.String("listen", ":8080", "address to listen on")
	node := flag.String("node", "", "name of the node, shown on /")
	static := flag.String("static", "/static", "directory served under /static/")
	flag.Parse()
	log.SetOutput(os.Stdout)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/static/", http.StripPrefix("/static/", http.FileServer(http.Dir(*static))))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s (datacenter %s)\n", *node, os.Getenv("DATACENTER"))
	})
	srv := &http.Server{Addr: *listen, Handler: logRequests(mux)}
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		<-c
		_ = srv.Close()
	}()
	log.Printf("listening on %s", *listen)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// logRequests logs each request but the health checks (every interval, they
// would drown the rest).
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		}
		next.ServeHTTP(w, r)
	})
}
