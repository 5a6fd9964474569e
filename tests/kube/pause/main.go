// Command pause is the sandbox ("pause") container's process of the test
// node's pods (tests/kube/node): it holds the pod's namespaces open, reaps
// the orphans that land on it as PID 1, and exits 0 on SIGTERM or SIGINT.
// Built statically (CGO_ENABLED=0), it is the whole of a FROM-scratch image,
// so the node needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
