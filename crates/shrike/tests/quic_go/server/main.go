// A plain quic-go HTTP/3 server for Shrike's interoperability tests: it answers every path
// with a fixed-size body, so the client's byte accounting can be checked against a peer
// that shares none of Shrike's code.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/quic-go/quic-go/http3"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "UDP address to bind")
	certFile := flag.String("cert", "", "PEM certificate")
	keyFile := flag.String("key", "", "PEM private key")
	size := flag.Int("size", 1000, "response body size in bytes")
	flag.Parse()

	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatalf("loading certificate: %v", err)
	}
	addr, err := net.ResolveUDPAddr("udp", *listen)
	if err != nil {
		log.Fatalf("resolving %s: %v", *listen, err)
	}
	// Binding here rather than in ListenAndServe lets port 0 work: the test learns the
	// real port from the first stdout line.
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		log.Fatalf("binding %s: %v", *listen, err)
	}
	fmt.Println(conn.LocalAddr().String())
	os.Stdout.Sync()

	body := make([]byte, *size)
	for i := range body {
		body[i] = 'a'
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Drain any request body so the stream closes cleanly on both sides.
		_, _ = r.Body.Read(make([]byte, 4096))
		w.Header().Set("content-length", strconv.Itoa(len(body)))
		w.Header().Set("x-served-by", "quic-go")
		_, _ = w.Write(body)
	})
	server := &http3.Server{
		Handler:   handler,
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
	}
	if err := server.Serve(conn); err != nil {
		log.Fatalf("serving: %v", err)
	}
}
