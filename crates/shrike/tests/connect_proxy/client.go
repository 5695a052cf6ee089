// The client side, for testing `shrike serve --connect-proxy` with a peer that shares no
// code with Shrike: Go's own HTTP/2 client opens -tunnels CONNECT streams through the proxy
// at -via (h2c, or TLS trusting -ca) to -target, and sends -requests HTTP/1.1 GETs through
// each; then one CONNECT-UDP tunnel (extended CONNECT, RFC 8441 and RFC 9298) to a UDP echo
// server of its own on loopback carries -datagrams DATAGRAM capsules each way. Prints what
// got through as JSON, and exits 1 if anything did not.

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

type clientResult struct {
	Tunnels   int64  `json:"tunnels"`
	Responses int64  `json:"responses"`
	Echoed    int64  `json:"datagrams_echoed"`
	Error     string `json:"error,omitempty"`
}

func runClient(via, ca, target string, tunnels, requests, datagrams int) {
	client, err := h2Client(via, ca)
	var res clientResult
	if err == nil {
		var wg sync.WaitGroup
		var failure atomic.Value
		for i := 0; i < tunnels; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := tcpTunnel(client, via, target, requests, &res); err != nil {
					failure.Store(err.Error())
				}
			}()
		}
		wg.Wait()
		if f, ok := failure.Load().(string); ok {
			err = fmt.Errorf("%s", f)
		}
	}
	if err == nil && datagrams > 0 {
		err = udpTunnel(client, via, datagrams, &res)
	}
	if err != nil {
		res.Error = err.Error()
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}

// h2Client speaks HTTP/2 only: h2c with prior knowledge, or ALPN h2 over TLS. It is
// golang.org/x/net's transport, which sends extended CONNECT (net/http's refuses the
// :protocol field).
func h2Client(via, ca string) (*http.Client, error) {
	tr := &http2.Transport{}
	if strings.HasPrefix(via, "https://") {
		pool, err := caPool(ca)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	} else {
		tr.AllowHTTP = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}, nil
}

// tcpTunnel opens one CONNECT tunnel to target and sends requests GETs through it.
func tcpTunnel(client *http.Client, via, target string, requests int, res *clientResult) error {
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodConnect, via, pr)
	if err != nil {
		return err
	}
	req.Host = target
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CONNECT %s: %s", target, resp.Status)
	}
	atomic.AddInt64(&res.Tunnels, 1)
	br := bufio.NewReader(resp.Body)
	for i := 0; i < requests; i++ {
		if _, err := fmt.Fprintf(pw, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", target); err != nil {
			return err
		}
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("a response through the tunnel: %v", err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			atomic.AddInt64(&res.Responses, 1)
		}
	}
	pw.Close()
	return nil
}

// udpTunnel echoes datagrams through one CONNECT-UDP tunnel to a loopback echo server.
func udpTunnel(client *http.Client, via string, datagrams int, res *clientResult) error {
	echo, err := udpEcho()
	if err != nil {
		return err
	}
	defer echo.Close()
	_, port, _ := net.SplitHostPort(echo.LocalAddr().String())
	pr, pw := io.Pipe()
	url := strings.TrimSuffix(via, "/") + "/.well-known/masque/udp/127.0.0.1/" + port + "/"
	req, err := http.NewRequest(http.MethodConnect, url, pr)
	if err != nil {
		return err
	}
	req.Header.Set(":protocol", "connect-udp")
	req.Header.Set("Capsule-Protocol", "?1")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CONNECT-UDP: %s", resp.Status)
	}
	if resp.Header.Get("Capsule-Protocol") != "?1" {
		return fmt.Errorf("CONNECT-UDP: no capsule-protocol: ?1 in the 200")
	}
	atomic.AddInt64(&res.Tunnels, 1)
	br := bufio.NewReader(resp.Body)
	for i := 0; i < datagrams; i++ {
		// One at a time, each 1,000 bytes: UDP may drop, loopback under no load does not.
		payload := []byte(fmt.Sprintf("%04d", i) + strings.Repeat("x", 996))
		capsule := appendVarint(nil, 0)
		capsule = appendVarint(capsule, uint64(len(payload)+1))
		capsule = append(capsule, 0)
		if _, err := pw.Write(append(capsule, payload...)); err != nil {
			return err
		}
		kind, err := readVarint(br)
		if err != nil {
			return fmt.Errorf("datagram %d: %v", i, err)
		}
		n, err := readVarint(br)
		if err != nil {
			return err
		}
		got := make([]byte, n)
		if _, err := io.ReadFull(br, got); err != nil {
			return err
		}
		if kind == 0 && len(got) > 0 && got[0] == 0 && string(got[1:]) == string(payload) {
			res.Echoed++
		}
	}
	pw.Close()
	return nil
}

// udpEcho is a loopback UDP server sending every datagram back to its sender.
func udpEcho() (net.PacketConn, error) {
	echo, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			echo.WriteTo(buf[:n], from)
		}
	}()
	return echo, nil
}

// caPool trusts the PEM certificates in file.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool, nil
}
