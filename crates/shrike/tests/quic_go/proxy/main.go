// A CONNECT proxy on quic-go's HTTP/3 server, sharing no code with Shrike, for the tunnel
// tests: each CONNECT (RFC 9114 §4.4: :method and :authority only; quic-go refuses a CONNECT
// with :scheme or :path) opens a TCP connection to a loopback destination and carries bytes
// both ways on the request stream. It refuses the ports in -deny with 403, and serves its
// counts as JSON: tunnels opened and QUIC connections accepted (so a test can see many
// tunnels ride one connection), at any GET over HTTP/3 and, for tools without HTTP/3, over
// HTTP/1.1 on a loopback TCP port.
//
// usage: proxy -cert FILE -key FILE [-deny PORT,PORT]; prints its UDP address, then the TCP
// address of its counts.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func main() {
	certFile := flag.String("cert", "", "PEM certificate")
	keyFile := flag.String("key", "", "PEM private key")
	deny := flag.String("deny", "", "comma-separated destination ports refused with 403")
	flag.Parse()
	denied := map[string]bool{}
	for _, p := range strings.Split(*deny, ",") {
		if p != "" {
			denied[p] = true
		}
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatalf("loading certificate: %v", err)
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		log.Fatalf("binding: %v", err)
	}
	stats, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("binding: %v", err)
	}
	fmt.Println(conn.LocalAddr().String())
	fmt.Println(stats.Addr().String())
	os.Stdout.Sync()

	var tunnels, conns atomic.Int64
	counts := func(w http.ResponseWriter) {
		fmt.Fprintf(w, `{"tunnels":%d,"connections":%d}`, tunnels.Load(), conns.Load())
	}
	go http.Serve(stats, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		counts(w)
	}))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			counts(w)
			return
		}
		host, port, err := net.SplitHostPort(r.Host)
		if err != nil || (host != "127.0.0.1" && host != "localhost") {
			http.Error(w, "loopback only", http.StatusForbidden)
			return
		}
		if denied[port] {
			http.Error(w, "denied", http.StatusForbidden)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		tunnels.Add(1)
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if rc.Flush() != nil {
			return
		}
		go func() {
			io.Copy(up, r.Body)
			up.(*net.TCPConn).CloseWrite()
		}()
		buf := make([]byte, 32*1024)
		for {
			n, err := up.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	server := &http3.Server{
		Handler:   handler,
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			conns.Add(1)
			return ctx
		},
	}
	if err := server.Serve(conn); err != nil {
		log.Fatalf("serving: %v", err)
	}
}
