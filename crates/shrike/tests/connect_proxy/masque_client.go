// The MASQUE client side (-masque), for testing `shrike serve --connect-proxy` on its HTTP/3
// port with a peer that shares no code with Shrike: masque-go's client opens one CONNECT-UDP
// tunnel (HTTP/3 datagrams) through the proxy at -masque (trusting -ca) to a UDP echo server
// of the client's own on loopback (client.go's), and sends -datagrams payloads one at a time,
// each waiting for its echo. Prints what came back as JSON, and exits 1 if anything did not.

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/quic-go/masque-go"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/yosida95/uritemplate/v3"
)

func runMasqueClient(via, ca string, datagrams int) {
	echoed, err := echoThrough(via, ca, datagrams)
	res := map[string]any{"datagrams_echoed": echoed}
	if err != nil {
		res["error"] = err.Error()
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}

func echoThrough(via, ca string, datagrams int) (int, error) {
	echo, err := udpEcho()
	if err != nil {
		return 0, err
	}
	defer echo.Close()
	pool, err := caPool(ca)
	if err != nil {
		return 0, err
	}
	tr := masque.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{http3.NextProtoH3}},
		QUICConfig:      &quic.Config{EnableDatagrams: true, InitialPacketSize: 1350},
	}
	template := uritemplate.MustNew(strings.TrimSuffix(via, "/") +
		"/.well-known/masque/udp/{target_host}/{target_port}/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := masque.NewRequest(ctx, template, echo.LocalAddr().String())
	if err != nil {
		return 0, err
	}
	conn, rsp, err := tr.Dial(req)
	if err != nil {
		if rsp != nil {
			return 0, fmt.Errorf("CONNECT-UDP: %s", rsp.Status)
		}
		return 0, err
	}
	defer conn.Close()
	echoed := 0
	buf := make([]byte, 2048)
	for i := 0; i < datagrams; i++ {
		// 1,000 bytes each, one at a time: UDP may drop, loopback under no load does not.
		payload := []byte(fmt.Sprintf("%04d", i) + strings.Repeat("x", 996))
		if _, err := conn.WriteTo(payload, nil); err != nil {
			return echoed, err
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return echoed, fmt.Errorf("datagram %d: %v", i, err)
		}
		if string(buf[:n]) == string(payload) {
			echoed++
		}
	}
	return echoed, nil
}
