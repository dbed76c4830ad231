package gobrpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"time"
)

// A Server serves the methods registered with Handle to net/rpc clients
// that connect as rpc.DialHTTP does. Register every method before Serve.
type Server struct {
	// HeaderTimeout bounds reading a connection's CONNECT request
	// (net/http's ReadHeaderTimeout); zero means 10 s.
	HeaderTimeout time.Duration

	methods  map[string]method
	services map[string]bool
}

type method struct {
	newArgs func() any
	call    func(ctx context.Context, args any) (reply any, err error)
}

// NewServer returns a server with no methods.
func NewServer() *Server {
	return &Server{methods: map[string]method{}, services: map[string]bool{}}
}

// Handle registers fn as serviceMethod ("Service.Method"): a call decodes
// its argument into a new A and answers with the R that fn filled, or
// with fn's error. It fails when A or R is outside what gobrpc encodes.
func Handle[A, R any](s *Server, serviceMethod string, fn func(*A, *R) error) error {
	return HandleContext(s, serviceMethod, func(_ context.Context, args *A, reply *R) error { return fn(args, reply) })
}

// HandleContext is Handle for a method that wants to know when its
// caller is gone: ctx ends when the client's connection ends (it hung up,
// or was killed) or Serve's context does, so that the method can give up,
// or undo what it did for an answer nobody will read.
func HandleContext[A, R any](s *Server, serviceMethod string, fn func(context.Context, *A, *R) error) error {
	dot := strings.LastIndex(serviceMethod, ".")
	if dot < 0 {
		return fmt.Errorf("method %q: want Service.Method", serviceMethod)
	}
	for _, t := range []reflect.Type{reflect.TypeFor[A](), reflect.TypeFor[R]()} {
		if _, err := NewEncoder(io.Discard).typeID(t); err != nil {
			return fmt.Errorf("method %s: %w", serviceMethod, err)
		}
	}
	s.services[serviceMethod[:dot]] = true
	s.methods[serviceMethod] = method{
		newArgs: func() any { return new(A) },
		call: func(ctx context.Context, args any) (any, error) {
			reply := new(R)
			return reply, fn(ctx, args.(*A), reply)
		},
	}
	return nil
}

// Serve accepts connections on l and serves each until ctx ends, then
// closes l and the connections still open and returns nil. It returns
// an error when l fails otherwise; Accept errors such as EMFILE are waited
// out, as net/http does.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		_ = l.Close() // ends Accept below
		for c := range conns {
			_ = c.Close() // the call's plugin sees EOF, as with a daemon that exits
		}
		conns = nil
	})
	defer stop()
	var delay time.Duration
	for {
		conn, err := l.Accept()
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		if err != nil {
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
			}
			continue
		}
		delay = 0
		mu.Lock()
		if conns == nil { // ctx ended since Accept returned
			mu.Unlock()
			conn.Close()
			return nil
		}
		conns[conn] = true
		mu.Unlock()
		go func() {
			s.serveHTTP(ctx, conn)
			mu.Lock()
			delete(conns, conn)
			mu.Unlock()
		}()
	}
}

// serveHTTP answers the HTTP request that opens a connection as net/rpc's
// server behind http.ServeMux does (CONNECT on DefaultPath: 200, then
// RPC; another path: 404; another method: 405), then serves the calls.
func (s *Server) serveHTTP(ctx context.Context, conn net.Conn) {
	timeout := s.HeaderTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	_ = conn.SetDeadline(time.Now().Add(timeout)) // a unix socket always takes a deadline
	br := bufio.NewReader(conn)
	start, err := readHead(br)
	if err != nil {
		var ne net.Error
		if !errors.As(err, &ne) && err != io.ErrUnexpectedEOF {
			answer(conn, "400 Bad Request", "400 Bad Request")
		}
		conn.Close()
		return
	}
	method, rest, _ := strings.Cut(start, " ")
	target, proto, ok := strings.Cut(rest, " ")
	path, _, _ := strings.Cut(target, "?")
	switch {
	case !ok || !strings.HasPrefix(proto, "HTTP/"):
		answer(conn, "400 Bad Request", "400 Bad Request")
	case path != DefaultPath:
		answer(conn, "404 Not Found", "404 page not found\n")
	case method != "CONNECT":
		answer(conn, "405 Method Not Allowed", "405 must CONNECT\n")
	default:
		_, err = io.WriteString(conn, "HTTP/1.0 "+connected+"\n\n")
		_ = conn.SetDeadline(time.Time{}) // an Allocate may take minutes
		if err == nil {
			s.serveConn(ctx, conn, br)
		}
	}
	conn.Close()
}

func answer(conn net.Conn, status, body string) {
	_, _ = fmt.Fprintf(conn, "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", status, len(body), body) // best effort: we close next
}

// serveConn reads calls until the client hangs up or sends what is not a
// request header. Each call runs in its own goroutine, as net/rpc's do;
// replies go out in the order the calls end. The calls' context ends
// when reading the next call fails: a net/rpc client writes nothing more
// while it waits, so that is its connection closing (the plugin exited or
// was killed).
func (s *Server) serveConn(ctx context.Context, conn net.Conn, br *bufio.Reader) {
	ctx, hungUp := context.WithCancel(ctx)
	defer hungUp()
	dec := NewDecoder(br)
	bw := bufio.NewWriter(conn)
	enc := NewEncoder(bw)
	var sending sync.Mutex
	send := func(req *request, reply any, errmsg string) {
		if errmsg != "" {
			reply = struct{}{} // net/rpc's invalidRequest
		}
		sending.Lock()
		defer sending.Unlock()
		err := enc.Encode(&response{ServiceMethod: req.ServiceMethod, Seq: req.Seq, Error: errmsg})
		if err == nil {
			err = enc.Encode(reply)
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			conn.Close() // the stream is broken mid-reply, or the client is gone
		}
	}
	var wg sync.WaitGroup
	for {
		req := new(request)
		if err := dec.Decode(req); err != nil {
			break
		}
		m, errmsg := s.lookup(req.ServiceMethod)
		if errmsg != "" {
			_ = dec.Decode(nil) // discard the arguments; a broken stream ends the loop next
			send(req, nil, errmsg)
			continue
		}
		args := m.newArgs()
		if err := dec.Decode(args); err != nil {
			send(req, nil, err.Error())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := m.call(ctx, args)
			errmsg := ""
			if err != nil {
				errmsg = err.Error()
			}
			send(req, reply, errmsg)
		}()
	}
	hungUp()
	wg.Wait()
}

// lookup finds a method, or returns net/rpc's error text for a name it
// lacks.
func (s *Server) lookup(name string) (method, string) {
	if m, ok := s.methods[name]; ok {
		return m, ""
	}
	dot := strings.LastIndex(name, ".")
	switch {
	case dot < 0:
		return method{}, "rpc: service/method request ill-formed: " + name
	case !s.services[name[:dot]]:
		return method{}, "rpc: can't find service " + name
	}
	return method{}, "rpc: can't find method " + name
}
