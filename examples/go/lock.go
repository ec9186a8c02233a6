// A lock shared by processes, from ZooKeeper's stock Go client
// (github.com/samuel/go-zookeeper/zk), calling wazoo's built-in `lock`
// recipe through standard operations only (docs/RECIPES.md, "Calling from
// any client"): each run acquires /examples/lock, holds it, releases. Start
// several at once: they take turns, in arrival order (ZooKeeper Recipes and
// Solutions, "Locks", run server-side).
//
// A call is an ephemeral sequential create of
// /zookeeper/calls/<module>/<method> with JSON arguments; the created node
// holds {"done": RESULT}, or {"waiting": TOKEN} and later {"done": ...} or
// {"error": ...}, which fires a getData watch.
//
// Against `cargo run --release -p wazoo -- dev` (127.0.0.1:2181), with
// Debian's golang-go and golang-github-samuel-go-zookeeper-dev:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o target/go-lock examples/go/lock.go
//	for i in 1 2 3; do target/go-lock & done; wait
//
// Flags: -server HOST:PORT[,...] (default 127.0.0.1:2181), -path, -hold.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"log"
	"os"
	"strings"
	"time"

	"github.com/samuel/go-zookeeper/zk"
)

// call runs METHOD of MODULE with ARGS and waits for its result (at most
// timeout): the "done" value as JSON text.
func call(conn *zk.Conn, module, method string, args interface{}, timeout time.Duration) (json.RawMessage, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	// Protected mode: after a lost reply the client finds its node by the
	// guid in its name, and wazoo takes that guid as the call's identity.
	node, err := conn.CreateProtectedEphemeralSequential("/zookeeper/calls/"+module+"/"+method, body, zk.WorldACL(zk.PermAll))
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", module, method, err)
	}
	defer conn.Delete(node, -1) // the node goes with the session anyway
	deadline := time.After(timeout)
	for {
		data, _, watch, err := conn.GetW(node)
		if err != nil {
			return nil, err
		}
		var result struct {
			Done    json.RawMessage `json:"done"`
			Waiting *string         `json:"waiting"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &result); err != nil {
			return nil, fmt.Errorf("%s: %w", node, err)
		}
		switch {
		case result.Error != nil:
			return nil, fmt.Errorf("%s.%s: error %d: %s", module, method, result.Error.Code, result.Error.Message)
		case result.Waiting == nil:
			return result.Done, nil
		}
		select {
		case <-watch: // the data changed (or the connection moved): read again
		case <-deadline:
			return nil, errors.New("timed out")
		}
	}
}

func main() {
	server := flag.String("server", "127.0.0.1:2181", "the ensemble, HOST:PORT[,...]")
	path := flag.String("path", "/examples/lock", "the lock's path")
	hold := flag.Duration("hold", time.Second, "how long to hold the lock")
	flag.Parse()
	conn, events, err := zk.Connect(strings.Split(*server, ","), 10*time.Second,
		zk.WithLogger(log.New(ioutil.Discard, "", 0)))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for e := range events {
		if e.State == zk.StateHasSession {
			break
		}
	}
	me := fmt.Sprintf("pid %d", os.Getpid())
	args := map[string]string{"path": *path, "id": me}
	fmt.Printf("%s: waiting for %s\n", me, *path)
	start := time.Now()
	node, err := call(conn, "lock", "acquire", args, time.Minute)
	if err != nil {
		log.Fatalf("%s: acquire: %v", me, err)
	}
	var held string
	json.Unmarshal(node, &held)
	fmt.Printf("%s: acquired after %.1f s as %s\n", me, time.Since(start).Seconds(), held)
	time.Sleep(*hold)
	if _, err := call(conn, "lock", "release", map[string]string{"path": *path}, time.Minute); err != nil {
		log.Fatalf("%s: release: %v", me, err)
	}
	fmt.Printf("%s: released\n", me)
}
