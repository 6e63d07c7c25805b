// Command app is the program inside the flotilla-test/app images the
// integration tests run as swarm tasks. Nothing can be pulled on a test
// machine, so the image is this one static binary imported with docker import.
//
// Usage:
//
//	app                 sleep until SIGTERM or SIGINT, then exit 0
//	app serve ADDR      answer every HTTP request on ADDR with "ok <HOSTNAME> <APP_MESSAGE>",
//	                    with the status APP_STATUS (default 200): a version that
//	                    fails is one environment value away
//	app healthcheck     exit 0 (a HEALTHCHECK CMD that always passes)
//	app exit N          exit with code N at once (a failing task)
//
// It prints its arguments and environment on start so task logs show what a
// service spec delivered.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fmt.Printf("app: args %q\n", args)
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		fmt.Println("app: env", kv)
	}

	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "":
		return sleep()
	case "healthcheck":
		return 0
	case "exit":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "app: usage: app exit N")
			return 2
		}
		n, err := strconv.Atoi(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "app: exit code:", err)
			return 2
		}
		return n
	case "serve":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "app: usage: app serve ADDR")
			return 2
		}
		return serve(args[1])
	default:
		fmt.Fprintf(os.Stderr, "app: unknown command %q\n", cmd)
		return 2
	}
}

// sleep blocks until the task is stopped; exiting 0 on SIGTERM keeps a
// stopped task from being reported as failed.
func sleep() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	fmt.Println("app: stopping")
	return 0
}

func serve(addr string) int {
	host, _ := os.Hostname()
	if h := os.Getenv("HOSTNAME"); h != "" {
		host = h
	}
	msg := os.Getenv("APP_MESSAGE")
	status := http.StatusOK
	if v := os.Getenv("APP_STATUS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n > 599 {
			fmt.Fprintf(os.Stderr, "app: APP_STATUS %q is not an HTTP status\n", v)
			return 2
		}
		status = n
	}
	srv := &http.Server{
		Addr: addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			fmt.Fprintf(w, "ok %s %s\n", host, msg)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Println("app: serving on", addr)

	select {
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "app: serve:", err)
		return 1
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "app: shutdown:", err)
	}
	return 0
}
