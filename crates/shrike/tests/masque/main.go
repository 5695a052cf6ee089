// A CONNECT-UDP proxy (RFC 9298) on quic-go's HTTP/3 server and its MASQUE library,
// github.com/quic-go/masque-go, sharing no code with Shrike, for the tunnel tests: UDP
// payloads travel as HTTP/3 datagrams (RFC 9297, QUIC DATAGRAM frames), to loopback
// destinations only. Counts tunnels and QUIC connections, served as JSON over HTTP/1.1 on a
// loopback TCP port (for tools without HTTP/3).
//
// usage: masque -cert FILE -key FILE [-deny PORT,PORT]; prints its UDP address, then the TCP
// address of its counts. With -via it is a client instead (client.go).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/quic-go/masque-go"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/yosida95/uritemplate/v3"
)

func main() {
	certFile := flag.String("cert", "", "PEM certificate")
	keyFile := flag.String("key", "", "PEM private key")
	deny := flag.String("deny", "", "comma-separated destination ports refused with 403")
	via := flag.String("via", "", "client: the proxy's https:// URL")
	ca := flag.String("ca", "", "client: the proxy's CA (PEM)")
	datagrams := flag.Int("datagrams", 50, "client: datagrams echoed through one tunnel")
	flag.Parse()
	if *via != "" {
		runClient(*via, *ca, *datagrams)
		return
	}
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
	addr := conn.LocalAddr().String()
	fmt.Println(addr)
	fmt.Println(stats.Addr().String())
	os.Stdout.Sync()

	template := uritemplate.MustNew("https://" + addr +
		"/.well-known/masque/udp/{target_host}/{target_port}/")
	var tunnels, conns atomic.Int64
	go http.Serve(stats, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"udp_tunnels":%d,"connections":%d}`, tunnels.Load(), conns.Load())
	}))
	proxy := masque.Proxy{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := masque.ParseProxyRequest(r, template)
		if err != nil {
			var perr *masque.ProxyRequestParseError
			if errors.As(err, &perr) {
				w.WriteHeader(perr.HTTPStatus)
				return
			}
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		host, port, _ := net.SplitHostPort(req.Target)
		if (host != "127.0.0.1" && host != "localhost") || denied[port] {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		tunnels.Add(1)
		proxy.Proxy(w, req)
	})
	server := &http3.Server{
		Handler:         handler,
		TLSConfig:       http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		EnableDatagrams: true,
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			conns.Add(1)
			return ctx
		},
	}
	if err := server.Serve(conn); err != nil {
		log.Fatalf("serving: %v", err)
	}
}
