// The HTTP/3 side (-h3): quic-go's server, and masque-go for CONNECT-UDP.

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/quic-go/masque-go"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/yosida95/uritemplate/v3"
)

// serveH3 serves handler over HTTP/3 on UDP port, counting QUIC connections in conns.
func serveH3(port int, certFile, keyFile string, handler http.Handler, conns *atomic.Int64) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		log.Fatalf("-h3 needs -cert and -key: %v", err)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		log.Fatalf("binding UDP port %d: %v", port, err)
	}
	server := &http3.Server{
		Handler:         handler,
		TLSConfig:       http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		EnableDatagrams: true,
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			conns.Add(1)
			return ctx
		},
	}
	log.Fatal(server.Serve(udp))
}

// masqueUDP serves a CONNECT-UDP request over HTTP/3 with masque-go: UDP payloads as HTTP/3
// datagrams, to loopback destinations outside -deny only.
func masqueUDP(w http.ResponseWriter, r *http.Request, template *uritemplate.Template,
	proxy *masque.Proxy, denied map[string]bool, tunnels *atomic.Int64) {
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
}
