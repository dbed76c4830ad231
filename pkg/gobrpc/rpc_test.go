package gobrpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/rpc"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// dhcpService is the shape of the dhcp daemon's service: it checks that
// the arguments arrived whole and answers with a full result.
type dhcpService struct {
	slow chan struct{} // Slow waits on it
}

func (s *dhcpService) Allocate(args *skel.CmdArgs, res *current.Result) error {
	if !reflect.DeepEqual(args, fullArgs()) {
		return fmt.Errorf("arguments arrived as %#v", args)
	}
	*res = *fullResult()
	return nil
}

func (s *dhcpService) Release(args *skel.CmdArgs, reply *struct{}) error {
	if args.ContainerID == "" {
		return errors.New("release: no container ID")
	}
	return nil
}

func (s *dhcpService) Fail(args *skel.CmdArgs, res *current.Result) error {
	res.CNIVersion = "must not travel"
	return fmt.Errorf("daemon holds no lease for %s", args.ContainerID)
}

func (s *dhcpService) Slow(args *skel.CmdArgs, res *current.Result) error {
	<-s.slow
	res.CNIVersion = "slow"
	return nil
}

func sockPath(t *testing.T) string { return filepath.Join(t.TempDir(), "rpc.sock") }

// stdServer serves svc with net/rpc behind net/http, as upstream's daemon.
func stdServer(t *testing.T, svc *dhcpService) string {
	sock := sockPath(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("DHCP", svc); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(rpc.DefaultRPCPath, srv)
	hs := &http.Server{Handler: mux}
	go hs.Serve(l) //nolint:errcheck // ends with Close
	t.Cleanup(func() { hs.Close() })
	return sock
}

// ourServer serves svc with our Server.
func ourServer(t *testing.T, svc *dhcpService, timeout time.Duration) string {
	sock := sockPath(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer()
	srv.HeaderTimeout = timeout
	for _, err := range []error{
		Handle(srv, "DHCP.Allocate", svc.Allocate), Handle(srv, "DHCP.Release", svc.Release),
		Handle(srv, "DHCP.Fail", svc.Fail), Handle(srv, "DHCP.Slow", svc.Slow),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return sock
}

func wantResult(t *testing.T) *current.Result {
	return viaGob(t, []any{fullResult()})[0].(*current.Result)
}

// callAll makes the calls the dhcp plugin makes, and the failing ones,
// several times on one connection.
func callAll(t *testing.T, call func(method string, args, reply any) error) {
	t.Helper()
	for round := range 3 {
		res := &current.Result{}
		if err := call("DHCP.Allocate", fullArgs(), res); err != nil {
			t.Fatalf("round %d: Allocate: %v", round, err)
		}
		if !reflect.DeepEqual(res, wantResult(t)) {
			t.Fatalf("round %d: Allocate replied\n%#v\nwant\n%#v", round, res, wantResult(t))
		}
		if err := call("DHCP.Release", fullArgs(), &struct{}{}); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		if err := call("DHCP.Release", &skel.CmdArgs{}, &struct{}{}); err == nil || err.Error() != "release: no container ID" {
			t.Fatalf("round %d: Release without ID: %v", round, err)
		}
		res = &current.Result{}
		err := call("DHCP.Fail", &skel.CmdArgs{ContainerID: "c9"}, res)
		if err == nil || err.Error() != "daemon holds no lease for c9" || res.CNIVersion != "" {
			t.Fatalf("round %d: Fail: %v (reply %+v)", round, err, res)
		}
		for method, msg := range map[string]string{
			"DHCP.Nope": "rpc: can't find method DHCP.Nope", "Other.Allocate": "rpc: can't find service Other.Allocate",
			"nodot": "rpc: service/method request ill-formed: nodot",
		} {
			if err := call(method, fullArgs(), &struct{}{}); err == nil || err.Error() != msg {
				t.Fatalf("round %d: %s: %v, want %q", round, method, err, msg)
			}
		}
	}
}

// callAllServerErrors is callAll through call, each of whose errors must
// be the client's E: what the server answered, not a failed exchange.
func callAllServerErrors[E error](t *testing.T, call func(method string, args, reply any) error) {
	t.Helper()
	callAll(t, func(m string, a, r any) error {
		err := call(m, a, r)
		var se E
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("%s: %v is not a ServerError", m, err)
		}
		return err
	})
}

// ourClient is our client on the unix socket sock, closed when the test
// ends.
func ourClient(t *testing.T, sock string) *Client {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestOurClientNetRPCServer(t *testing.T) {
	callAllServerErrors[ServerError](t, ourClient(t, stdServer(t, &dhcpService{})).Call)
}

func TestNetRPCClientOurServer(t *testing.T) {
	c, err := rpc.DialHTTP("unix", ourServer(t, &dhcpService{}, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	callAllServerErrors[rpc.ServerError](t, c.Call)
}

func TestOurClientOurServer(t *testing.T) {
	callAll(t, ourClient(t, ourServer(t, &dhcpService{}, 0)).Call)
}

// One connection's calls run concurrently: a slow call does not hold up
// the next, whose reply overtakes it.
func TestConcurrentCallsReplyOutOfOrder(t *testing.T) {
	svc := &dhcpService{slow: make(chan struct{})}
	c, err := rpc.DialHTTP("unix", ourServer(t, svc, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slowRes := &current.Result{}
	slow := c.Go("DHCP.Slow", fullArgs(), slowRes, nil)
	fast := make([]*rpc.Call, 3)
	for i := range fast {
		fast[i] = c.Go("DHCP.Allocate", fullArgs(), &current.Result{}, nil)
	}
	for i, f := range fast {
		select {
		case <-f.Done:
			if f.Error != nil {
				t.Fatalf("fast call %d: %v", i, f.Error)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a fast call waited for the slow one")
		}
	}
	select {
	case <-slow.Done:
		t.Fatal("the slow call ended before it was let go")
	default:
	}
	close(svc.slow)
	<-slow.Done
	if slow.Error != nil || slowRes.CNIVersion != "slow" {
		t.Fatalf("slow call: %v %+v", slow.Error, slowRes)
	}
}

// headOf sends raw to sock and returns the status and body of the answer.
func headOf(t *testing.T, sock, raw string) (string, string) {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	defer resp.Body.Close()
	body := ""
	if method != "CONNECT" || resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return resp.Status, body
}

// The HTTP side answers as net/rpc behind http.ServeMux does.
func TestHTTPAnswersAsNetRPC(t *testing.T) {
	std, ours := stdServer(t, &dhcpService{}), ourServer(t, &dhcpService{}, 0)
	for _, raw := range []string{
		"CONNECT /_goRPC_ HTTP/1.0\n\n",
		"GET /_goRPC_ HTTP/1.0\r\n\r\n",
		"POST /_goRPC_ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"CONNECT /elsewhere HTTP/1.0\n\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		ws, wb := headOf(t, std, raw)
		gs, gb := headOf(t, ours, raw)
		if gs != ws || gb != wb {
			t.Errorf("%q: answered %q %q, net/rpc answers %q %q", raw, gs, gb, ws, wb)
		}
	}
}

func TestClientRefusesAnotherHTTPServer(t *testing.T) {
	sock := sockPath(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NewServeMux()}
	go hs.Serve(l) //nolint:errcheck // ends with Close
	defer hs.Close()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := NewClient(conn); err == nil || !strings.Contains(err.Error(), `unexpected HTTP response "404 Not Found"`) {
		t.Fatalf("handshake with a plain HTTP server: %v", err)
	}
}

// A client that connects and says nothing is dropped after HeaderTimeout;
// a cancelled Serve closes the listener and the connections it holds.
func TestTimeoutAndShutdown(t *testing.T) {
	sock := sockPath(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer()
	srv.HeaderTimeout = 200 * time.Millisecond
	svc := &dhcpService{slow: make(chan struct{})}
	if err := Handle(srv, "DHCP.Slow", svc.Slow); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()

	silent, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if n, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent client: read %d, %v; want EOF", n, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("silent client dropped after %s", d)
	}

	c, err := rpc.DialHTTP("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := c.Go("DHCP.Slow", fullArgs(), &current.Result{}, nil)
	time.Sleep(50 * time.Millisecond) // let the call reach the server
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	select {
	case <-call.Done:
		if call.Error == nil {
			t.Fatal("a call in flight at shutdown succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call in flight at shutdown did not end")
	}
	close(svc.slow)
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("the listener still accepts after shutdown")
	}
}

func TestHandleRefusesUnsupportedTypes(t *testing.T) {
	srv := NewServer()
	if err := Handle(srv, "S.M", func(*map[string]int, *struct{}) error { return nil }); err == nil {
		t.Fatal("registered a map argument")
	}
	if err := Handle(srv, "nodot", func(*struct{}, *struct{}) error { return nil }); err == nil {
		t.Fatal("registered a method name without a service")
	}
}
