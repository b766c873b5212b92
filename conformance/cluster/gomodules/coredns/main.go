// Command coredns is CoreDNS with only the plugins the embedded cluster's DNS server uses.
//
// CoreDNS's own main imports core/plugin, which pulls in every plugin (cloud DNS providers,
// etcd, dnstap, ...). The embedded cluster only answers Kubernetes names, so this build imports
// the kubernetes plugin and the few the generated Corefile uses (bind, ready, errors, log), and
// sets the directive order to match: a subset of CoreDNS's core/dnsserver/zdirectives.go, in the
// same relative order.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives: execution order, as in CoreDNS's generated list.
var directives = []string{
	"bind",
	"ready",
	"errors",
	"log",
	"kubernetes",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		panic(err)
	}
	coremain.Run()
}
