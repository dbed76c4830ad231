package gobrpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// DefaultPath is net/rpc's DefaultRPCPath, which rpc.DialHTTP asks for.
const DefaultPath = "/_goRPC_"

// connected is the status net/rpc's server answers a CONNECT with.
const connected = "200 Connected to Go RPC"

// maxHeader bounds an HTTP head either side reads.
const maxHeader = 64 << 10

// request and response are net/rpc's Request and Response headers: the
// field names and types are what counts on the wire.
type request struct {
	ServiceMethod string
	Seq           uint64
}

type response struct {
	ServiceMethod string
	Seq           uint64
	Error         string
}

// ServerError is an error the server's method returned, as net/rpc's
// rpc.ServerError: the call reached the server and failed there.
type ServerError string

func (e ServerError) Error() string { return string(e) }

// A Client makes calls on one connection, one at a time, as net/rpc's
// client does with a single caller.
type Client struct {
	conn net.Conn
	bw   *bufio.Writer
	enc  *Encoder
	dec  *Decoder
	mu   sync.Mutex
	seq  uint64
}

// NewClient does rpc.DialHTTP's handshake on conn (CONNECT to
// DefaultPath, which must answer "200 Connected to Go RPC") and returns a
// client for it. Deadlines on conn are the caller's. On error conn is left
// open.
func NewClient(conn net.Conn) (*Client, error) {
	if _, err := io.WriteString(conn, "CONNECT "+DefaultPath+" HTTP/1.0\n\n"); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	status, err := readHead(br)
	if err != nil {
		return nil, err
	}
	proto, code, _ := strings.Cut(status, " ")
	if !strings.HasPrefix(proto, "HTTP/") {
		return nil, fmt.Errorf("malformed HTTP response %q", status)
	}
	if code != connected {
		return nil, fmt.Errorf("unexpected HTTP response %q", code)
	}
	bw := bufio.NewWriter(conn)
	return &Client{conn: conn, bw: bw, enc: NewEncoder(bw), dec: NewDecoder(br)}, nil
}

// readHead reads an HTTP head (a start line, header lines, an empty line)
// and returns the start line. Bounded by maxHeader.
func readHead(br *bufio.Reader) (string, error) {
	var first string
	total := 0
	for {
		line, err := br.ReadSlice('\n')
		total += len(line)
		if err == bufio.ErrBufferFull || total > maxHeader {
			return "", fmt.Errorf("HTTP head longer than %d bytes", maxHeader)
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		s := strings.TrimRight(string(line), "\r\n")
		if first == "" {
			if s == "" {
				return "", errors.New("malformed HTTP head: empty start line")
			}
			first = s
			continue
		}
		if s == "" {
			return first, nil
		}
	}
}

// Call calls serviceMethod ("Service.Method") with args and decodes the
// result into reply (a pointer). An error the method returned is a
// ServerError; any other error means the connection is unusable.
func (c *Client) Call(serviceMethod string, args, reply any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	if err := c.enc.Encode(&request{ServiceMethod: serviceMethod, Seq: c.seq}); err != nil {
		return err
	}
	if err := c.enc.Encode(args); err != nil {
		return err
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	var resp response
	if err := c.dec.Decode(&resp); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // as net/rpc: the server hung up on a call
		}
		return err
	}
	if resp.Seq != c.seq {
		return fmt.Errorf("response to call %d, want %d", resp.Seq, c.seq)
	}
	if resp.Error != "" {
		// net/rpc sends an empty struct after an error; skip what comes.
		if err := c.dec.Decode(nil); err != nil {
			return fmt.Errorf("reading error body: %w", err)
		}
		return ServerError(resp.Error)
	}
	if err := c.dec.Decode(reply); err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	return nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
