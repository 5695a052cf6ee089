// A CONNECT proxy on Go's own net/http server, sharing no code with Shrike, for the tunnel
// tests: HTTP/2 CONNECT (RFC 9113 §8.5) over h2c with prior knowledge, or over TLS with ALPN
// h2 when given a certificate. It tunnels to loopback only, refuses the ports in -deny with
// 403, and serves its counts at GET /stats: tunnels opened and TCP connections accepted (so a
// test can see many tunnels ride one connection).
//
// usage: connect_proxy [-deny PORT,PORT] [-cert FILE -key FILE]; prints its address first.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

func main() {
	deny := flag.String("deny", "", "comma-separated destination ports refused with 403")
	cert := flag.String("cert", "", "TLS certificate (PEM); without it, h2c")
	key := flag.String("key", "", "TLS key (PEM)")
	flag.Parse()
	denied := map[string]bool{}
	for _, p := range strings.Split(*deny, ",") {
		if p != "" {
			denied[p] = true
		}
	}
	var tunnels, conns, h2 atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			if r.URL.Path == "/stats" {
				fmt.Fprintf(w, `{"tunnels":%d,"connections":%d,"h2_requests":%d}`,
					tunnels.Load(), conns.Load(), h2.Load())
				return
			}
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		if r.ProtoMajor == 2 {
			h2.Add(1)
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
		if err := rc.Flush(); err != nil {
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
	srv := &http.Server{
		Handler: handler,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	srv.Protocols = &protocols
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().String())
	if *cert != "" {
		err = srv.ServeTLS(ln, *cert, *key)
	} else {
		err = srv.Serve(ln)
	}
	log.Fatal(err)
}
