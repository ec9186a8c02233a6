// ZooKeeper's Go client (github.com/samuel/go-zookeeper/zk, Debian's
// golang-github-samuel-go-zookeeper-dev) against a server, for
// host/tests/go_client.rs. Subcommands:
//
//	lock HOSTS CHROOT LOCK_PATH GO_FILE
//	    Sessions start on the first of HOSTS. A recipe call through standard operations only (docs/RECIPES.md,
//	    "Calling from any client"): a holder session's acquire of the
//	    built-in lock, then a waiter session's acquire, which waits (its
//	    call node says "waiting") under a getData watch; prints "holder
//	    <data>" and "waiting <node> <data>", then waits until GO_FILE exists
//	    (the test may kill the leader meanwhile). The holder releases (a
//	    call too); the waiter's watch must fire and its node hold the lock:
//	    prints "held <data>", then "waiter on <the waiter's server>". CHROOT ("" for none) is prefixed to every
//	    path the calls create, which is all a chrooted client does on the
//	    wire (this client has no chroot option).
//	queue HOSTS CHROOT QUEUE_PATH
//	    A taker's (on the first of HOSTS) queue take that waits on the empty queue, a put by another
//	    session (on the second), the taker's node then holding the item: prints "taking
//	    <data>", "put <data>", "took <data>".
//	semaphore HOSTS CHROOT PATH
//	    Two leases of a semaphore of two, a third acquire that waits, a
//	    release that gives it the lease: prints each call's result.
//	transcript HOSTS
//	    Client API behaviors (a second session starts on the second of
//	    HOSTS) under /go (which must not exist), one line
//	    each, with nothing that differs between two runs of the same server
//	    (no session ids, zxids or times): the test compares the transcripts
//	    of ZooKeeper and wazoo.
//
// Exits 0 only if every step did what it says; a failed step prints
// "FAIL ..." and exits 1.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/ioutil"
	"log"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/samuel/go-zookeeper/zk"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}

// inOrder gives the servers in the order of the connect string (the
// client shuffles them otherwise), so that a session starts on the first.
type inOrder struct {
	servers []string
	next    int
	tried   int
}

func (h *inOrder) Init([]string) error { return nil }
func (h *inOrder) Len() int            { return len(h.servers) }
func (h *inOrder) Connected()          { h.tried = 0 }
func (h *inOrder) Next() (string, bool) {
	server := h.servers[h.next]
	h.next = (h.next + 1) % len(h.servers)
	h.tried++
	return server, h.tried > len(h.servers) && (h.tried-1)%len(h.servers) == 0
}

// connect opens a session on HOSTS (comma-separated), starting on the
// first, and waits for it.
func connect(hosts string) *zk.Conn {
	return connectFrom(hosts, 0)
}

// connectFrom opens a session starting on the i-th of HOSTS (modulo their
// number), then trying the ones after it.
func connectFrom(hosts string, i int) *zk.Conn {
	all := strings.Split(hosts, ",")
	servers := append(append([]string{}, all[i%len(all):]...), all[:i%len(all)]...)
	conn, events, err := zk.Connect(servers, 20*time.Second,
		zk.WithLogger(log.New(ioutil.Discard, "", 0)),
		zk.WithHostProvider(&inOrder{servers: servers}))
	if err != nil {
		fail("connect %s: %v", hosts, err)
	}
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e := <-events:
			if e.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			fail("no session on %s", hosts)
		}
	}
}

// retry runs op again while the connection is lost (the member died): the
// calls made here are safe to repeat.
func retry(op func() error) error {
	var err error
	for k := 0; k < 20; k++ {
		err = op()
		if err != zk.ErrConnectionClosed && err != zk.ErrNoServer {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// call makes a recipe call: an ephemeral sequential create of
// CHROOT/zookeeper/calls/MODULE/METHOD with JSON arguments. The created
// node's path, its data, and a watch on its data.
func call(conn *zk.Conn, chroot, module, method string, args interface{}) (string, string, <-chan zk.Event) {
	body, _ := json.Marshal(args)
	var node string
	err := retry(func() (err error) {
		node, err = conn.Create(chroot+"/zookeeper/calls/"+module+"/"+method, body,
			zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		return
	})
	if err != nil {
		fail("%s.%s: %v", module, method, err)
	}
	data, watch := get(conn, node)
	return node, data, watch
}

func get(conn *zk.Conn, node string) (string, <-chan zk.Event) {
	var data []byte
	var watch <-chan zk.Event
	err := retry(func() (err error) {
		data, _, watch, err = conn.GetW(node)
		return
	})
	if err != nil {
		fail("get %s: %v", node, err)
	}
	return string(data), watch
}

// changed waits for a watch to say the node's data changed.
func changed(watch <-chan zk.Event, what string) {
	select {
	case e := <-watch:
		if e.Type != zk.EventNodeDataChanged {
			fail("%s: watch said %v", what, e.Type)
		}
	case <-time.After(60 * time.Second):
		fail("%s: the watch never fired", what)
	}
}

func waitFile(path string) {
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lockScenario(hosts, chroot, lock, goFile string) {
	holder, waiter := connect(hosts), connect(hosts)
	args := map[string]string{"path": lock}
	_, data, _ := call(holder, chroot, "lock", "acquire", args)
	fmt.Printf("holder %s\n", data)
	node, data, watch := call(waiter, chroot, "lock", "acquire", args)
	session := waiter.SessionID()
	fmt.Printf("waiting %s %s\n", node, data)
	waitFile(goFile)
	_, data, _ = call(holder, chroot, "lock", "release", args)
	fmt.Printf("released %s\n", data)
	changed(watch, "the waiter's call")
	data, _ = get(waiter, node)
	if waiter.SessionID() != session {
		fail("the waiter's session changed")
	}
	fmt.Printf("held %s\n", data)
	fmt.Printf("waiter on %s\n", waiter.Server())
	holder.Close()
	waiter.Close()
}

func queueScenario(hosts, chroot, queue string) {
	taker, producer := connectFrom(hosts, 0), connectFrom(hosts, 1)
	node, data, watch := call(taker, chroot, "queue", "take", map[string]string{"path": queue})
	fmt.Printf("taking %s\n", data)
	_, data, _ = call(producer, chroot, "queue", "put", map[string]string{"path": queue, "data": "job-1"})
	fmt.Printf("put %s\n", data)
	changed(watch, "the taker's call")
	data, _ = get(taker, node)
	fmt.Printf("took %s\n", data)
	taker.Close()
	producer.Close()
}

func semaphoreScenario(hosts, chroot, path string) {
	a, b, c := connectFrom(hosts, 0), connectFrom(hosts, 1), connectFrom(hosts, 2)
	args := map[string]interface{}{"path": path, "max_leases": 2}
	for i, s := range []*zk.Conn{a, b} {
		_, data, _ := call(s, chroot, "semaphore", "acquire", args)
		fmt.Printf("lease %d %s\n", i+1, data)
	}
	node, data, watch := call(c, chroot, "semaphore", "acquire", args)
	fmt.Printf("third %s\n", data)
	_, data, _ = call(a, chroot, "semaphore", "release", map[string]string{"path": path})
	fmt.Printf("released %s\n", data)
	changed(watch, "the third acquire")
	data, _ = get(c, node)
	fmt.Printf("third %s\n", data)
	a.Close()
	b.Close()
	c.Close()
}

// --- transcript ---------------------------------------------------------

var acl = zk.WorldACL(zk.PermAll)

func show(data []byte) string {
	if data == nil {
		return "null"
	}
	return fmt.Sprintf("%q", data)
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// stat without zxids, times or session ids.
func stat(s *zk.Stat) string {
	return fmt.Sprintf("version=%d cversion=%d aversion=%d dataLength=%d numChildren=%d ephemeral=%v mzxid>=czxid=%v",
		s.Version, s.Cversion, s.Aversion, s.DataLength, s.NumChildren, s.EphemeralOwner != 0, s.Mzxid >= s.Czxid)
}

func event(watch <-chan zk.Event) string {
	select {
	case e, open := <-watch:
		if !open {
			return "closed without an event"
		}
		return fmt.Sprintf("%v %s", e.Type, e.Path)
	case <-time.After(30 * time.Second):
		return "no event"
	}
}

func transcript(hosts string) {
	c := connect(hosts)
	p := func(format string, args ...interface{}) { fmt.Printf(format+"\n", args...) }

	// Programmer's Guide, "ZooKeeper Data Model": create, get, set, null data.
	name, err := c.Create("/go", []byte("root"), 0, acl)
	p("create /go: %s %s", name, errText(err))
	name, err = c.Create("/go/null", nil, 0, acl)
	p("create /go/null (null data): %s %s", name, errText(err))
	data, st, err := c.Get("/go/null")
	p("get /go/null: %s %s %s", show(data), stat(st), errText(err))
	name, err = c.Create("/go/empty", []byte{}, 0, acl)
	p("create /go/empty (empty data): %s %s", name, errText(err))
	data, st, err = c.Get("/go/empty")
	p("get /go/empty: %s %s %s", show(data), stat(st), errText(err))
	st, err = c.Set("/go/empty", nil, 0)
	p("set /go/empty null version 0: %s %s", stat(st), errText(err))
	data, st, err = c.Get("/go/empty")
	p("get /go/empty: %s %s %s", show(data), stat(st), errText(err))
	st, err = c.Set("/go/null", []byte("x"), -1)
	p("set /go/null \"x\" version -1: %s %s", stat(st), errText(err))
	data, _, err = c.Get("/go/null")
	p("get /go/null: %s %s", show(data), errText(err))

	// Errors: "ZooKeeper Data Model", "Programmer's Guide, Error codes".
	_, err = c.Create("/go/null", nil, 0, acl)
	p("create /go/null again: %s", errText(err))
	_, err = c.Create("/go/missing/child", nil, 0, acl)
	p("create /go/missing/child: %s", errText(err))
	_, _, err = c.Get("/go/missing")
	p("get /go/missing: %s", errText(err))
	_, err = c.Set("/go/null", []byte("y"), 7)
	p("set /go/null version 7: %s", errText(err))
	err = c.Delete("/go/null", 0)
	p("delete /go/null version 0: %s", errText(err))
	err = c.Delete("/go", -1)
	p("delete /go (has children): %s", errText(err))
	err = c.Delete("/go/missing", -1)
	p("delete /go/missing: %s", errText(err))
	ok, _, err := c.Exists("/go/missing")
	p("exists /go/missing: %v %s", ok, errText(err))

	// "Ephemeral Nodes": a second session's ephemeral, gone with its session.
	other := connectFrom(hosts, 1)
	name, err = other.Create("/go/eph", []byte("e"), zk.FlagEphemeral, acl)
	p("create /go/eph ephemeral (other session): %s %s", name, errText(err))
	_, err = other.Create("/go/eph/child", nil, 0, acl)
	p("create /go/eph/child: %s", errText(err))
	_, err = c.Sync("/go/eph")
	p("sync: %s", errText(err))
	ok, st, watch, err := c.ExistsW("/go/eph")
	p("exists /go/eph: %v %s owner is the other session=%v %s", ok, stat(st), st.EphemeralOwner == other.SessionID(), errText(err))
	other.Close()
	p("the other session closed; watch: %s", event(watch))
	ok, _, err = c.Exists("/go/eph")
	p("exists /go/eph: %v %s", ok, errText(err))

	// "Sequence Nodes -- Unique Naming".
	_, err = c.Create("/go/seq", nil, 0, acl)
	p("create /go/seq: %s", errText(err))
	for _, f := range []struct {
		name  string
		flags int32
	}{{"n-", zk.FlagSequence}, {"n-", zk.FlagSequence | zk.FlagEphemeral}, {"m-", zk.FlagSequence}} {
		name, err = c.Create("/go/seq/"+f.name, []byte("s"), f.flags, acl)
		p("create /go/seq/%s flags %d: %s %s", f.name, f.flags, name, errText(err))
	}
	err = c.Delete("/go/seq/n-0000000000", -1)
	p("delete /go/seq/n-0000000000: %s", errText(err))
	name, err = c.Create("/go/seq/n-", nil, zk.FlagSequence, acl)
	p("create /go/seq/n- again: %s %s", name, errText(err))
	kids, st, err := c.Children("/go/seq")
	sort.Strings(kids)
	p("children /go/seq: %v %s %s", kids, stat(st), errText(err))

	// "ZooKeeper Watches": data, child, exists watches, each fired once.
	_, _, dataWatch, err := c.GetW("/go/null")
	p("getw /go/null: %s", errText(err))
	_, _, childWatch, err := c.ChildrenW("/go")
	p("childrenw /go: %s", errText(err))
	_, _, createWatch, err := c.ExistsW("/go/later")
	p("existsw /go/later: %s", errText(err))
	_, err = c.Set("/go/null", []byte("z"), -1)
	p("set /go/null: %s; data watch: %s", errText(err), event(dataWatch))
	_, err = c.Create("/go/later", nil, 0, acl)
	p("create /go/later: %s; exists watch: %s; child watch: %s", errText(err), event(createWatch), event(childWatch))
	_, err = c.Set("/go/null", []byte("w"), -1)
	// The client closes a watch's channel once it fired.
	select {
	case e, open := <-dataWatch:
		if open {
			p("set /go/null again: %s; the data watch fired again: %v", errText(err), e.Type)
		} else {
			p("set /go/null again: %s; the data watch fired once only", errText(err))
		}
	case <-time.After(time.Second):
		p("set /go/null again: %s; the data watch is still open", errText(err))
	}
	_, _, deleteWatch, err := c.GetW("/go/later")
	p("getw /go/later: %s", errText(err))
	err = c.Delete("/go/later", -1)
	p("delete /go/later: %s; data watch: %s", errText(err), event(deleteWatch))

	// Programmer's Guide, "Multi": all or nothing, a result per op.
	res, err := c.Multi(
		&zk.CreateRequest{Path: "/go/m1", Data: []byte("a"), Acl: acl},
		&zk.CreateRequest{Path: "/go/m2", Data: nil, Acl: acl},
		&zk.SetDataRequest{Path: "/go/m1", Data: []byte("b"), Version: 0},
		&zk.CheckVersionRequest{Path: "/go/m1", Version: 1},
		&zk.DeleteRequest{Path: "/go/m2", Version: 0},
	)
	p("multi create,create,set,check,delete: %s", errText(err))
	for i, r := range res {
		s := "-"
		if r.Stat != nil {
			s = stat(r.Stat)
		}
		p("  op %d: %q %s %s", i, r.String, s, errText(r.Error))
	}
	data, _, err = c.Get("/go/m1")
	p("get /go/m1: %s %s", show(data), errText(err))
	res, err = c.Multi(
		&zk.CreateRequest{Path: "/go/m3", Data: []byte("c"), Acl: acl},
		&zk.CheckVersionRequest{Path: "/go/m1", Version: 0},
		&zk.SetDataRequest{Path: "/go/m1", Data: []byte("d"), Version: -1},
	)
	p("multi create,check(bad version),set: %s", errText(err))
	for i, r := range res {
		p("  op %d: %q %s", i, r.String, errText(r.Error))
	}
	ok, _, err = c.Exists("/go/m3")
	p("exists /go/m3: %v %s", ok, errText(err))
	data, _, err = c.Get("/go/m1")
	p("get /go/m1: %s %s", show(data), errText(err))
	res, err = c.Multi(&zk.DeleteRequest{Path: "/go", Version: -1})
	p("multi delete /go (has children): %s", errText(err))
	for i, r := range res {
		p("  op %d: %s", i, errText(r.Error))
	}

	kids, st, err = c.Children("/go")
	sort.Strings(kids)
	p("children /go: %v %s %s", kids, stat(st), errText(err))

	expiry(hosts, c, p)
	c.Close()
	p("done")
}

// gate dials the servers until it is cut: then it closes the connections
// it made and refuses new ones until it is opened again.
type gate struct {
	mu     sync.Mutex
	closed bool
	conns  []net.Conn
}

func (g *gate) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errors.New("cut off by the test")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		g.conns = append(g.conns, conn)
	}
	return conn, err
}

func (g *gate) cut(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = closed
	for _, conn := range g.conns {
		conn.Close()
	}
	g.conns = nil
}

// Programmer's Guide, "ZooKeeper Sessions": a session cut off from every
// server for longer than its timeout expires; its ephemerals go (another
// session's watch fires), and when it reaches a server again it is told it
// expired (the client drops its watches, then makes a new session).
func expiry(hosts string, c *zk.Conn, p func(string, ...interface{})) {
	g := &gate{}
	states := make(chan zk.State, 1000)
	s, _, err := zk.Connect(strings.Split(hosts, ","), 4*time.Second,
		zk.WithLogger(log.New(ioutil.Discard, "", 0)), zk.WithDialer(g.dial),
		zk.WithEventCallback(func(e zk.Event) {
			if e.Type == zk.EventSession {
				select {
				case states <- e.State:
				default:
				}
			}
		}))
	if err != nil {
		fail("connect %s: %v", hosts, err)
	}
	state := func(want zk.State) string {
		deadline := time.After(60 * time.Second)
		for {
			select {
			case got := <-states:
				if got == want {
					return got.String()
				}
			case <-deadline:
				return "no " + want.String()
			}
		}
	}
	p("the short session: %s", state(zk.StateHasSession))
	first := s.SessionID()
	name, err := s.Create("/go/exp", nil, zk.FlagEphemeral, acl)
	p("create /go/exp ephemeral (short session): %s %s", name, errText(err))
	_, _, own, err := s.GetW("/go/exp")
	p("getw /go/exp (short session): %s", errText(err))
	_, err = c.Sync("/go/exp")
	p("sync: %s", errText(err))
	_, _, other, err := c.ExistsW("/go/exp")
	p("existsw /go/exp: %s", errText(err))
	g.cut(true)
	p("the short session cut off; watch: %s", event(other))
	g.cut(false)
	p("the short session reaches a server: %s", state(zk.StateExpired))
	select {
	case e := <-own:
		p("its watch: %v %s %v", e.Type, e.Path, e.Err)
	case <-time.After(30 * time.Second):
		p("its watch: nothing")
	}
	p("then: %s, a new session: %v", state(zk.StateHasSession), s.SessionID() != first && s.SessionID() != 0)
	ok, _, err := s.Exists("/go/exp")
	p("exists /go/exp: %v %s", ok, errText(err))
	s.Close()
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: client lock|queue|semaphore|transcript HOSTS ...")
	}
	switch a := os.Args[1:]; {
	case a[0] == "lock" && len(a) == 5:
		lockScenario(a[1], a[2], a[3], a[4])
	case a[0] == "queue" && len(a) == 4:
		queueScenario(a[1], a[2], a[3])
	case a[0] == "semaphore" && len(a) == 4:
		semaphoreScenario(a[1], a[2], a[3])
	case a[0] == "transcript" && len(a) == 2:
		transcript(a[1])
	default:
		fail("bad arguments %v", a)
	}
}
