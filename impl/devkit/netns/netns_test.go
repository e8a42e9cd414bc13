package netns

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHostsHaveTheirOwnNetwork makes a network of two hosts and shows that each has its own
// address on the network, that a command on a host reaches a server of the test's namespace
// listening on the bridge address (and is seen coming from the host's address), and that the
// test's loopback is not the host's: a server listening on the test's 127.0.0.1 is out of a
// host's reach.
func TestHostsHaveTheirOwnNetwork(t *testing.T) {
	nw := New(t, 2)
	if len(nw.Hosts) != 2 || !nw.Subnet.Contains(nw.Gateway) {
		t.Fatalf("network %v, gateway %v, %d hosts", nw.Subnet, nw.Gateway, len(nw.Hosts))
	}
	for _, h := range nw.Hosts {
		out, err := h.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", h, err, out)
		}
		if !strings.Contains(string(out), " "+h.Addr.String()+"/24 ") || !nw.Subnet.Contains(h.Addr) {
			t.Errorf("%s: its addresses are\n%s", h, out)
		}
		if strings.Contains(string(out), nw.Gateway.String()+"/") {
			t.Errorf("%s has the bridge's address:\n%s", h, out)
		}
	}

	bridged, err := net.Listen("tcp", net.JoinHostPort(nw.Gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer bridged.Close()
	loopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer loopback.Close()
	go func() {
		for {
			c, err := loopback.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	for _, h := range nw.Hosts {
		send := fmt.Sprintf("echo hello from %s >/dev/tcp/%s/%d", h.Name, nw.Gateway, bridged.Addr().(*net.TCPAddr).Port)
		if out, err := h.Command("bash", "-c", send).CombinedOutput(); err != nil {
			t.Fatalf("%s to the bridge address: %v\n%s", h, err, out)
		}
		_ = bridged.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
		c, err := bridged.Accept()
		if err != nil {
			t.Fatalf("%s: nothing arrived at the bridge address: %v", h, err)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		from := netip.MustParseAddrPort(c.RemoteAddr().String()).Addr()
		c.Close()
		if line != "hello from "+h.Name+"\n" || from != h.Addr {
			t.Errorf("%s: got %q from %v", h, line, from)
		}

		probe := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", loopback.Addr().(*net.TCPAddr).Port)
		if out, err := h.Command("bash", "-c", probe).CombinedOutput(); err == nil {
			t.Errorf("%s reached a server on the test's loopback: %s", h, out)
		}
	}
}

// TestTeardownRemovesEverything: once the test that made a network has ended, its namespaces
// and its bridge are gone (and the veths with them).
func TestTeardownRemovesEverything(t *testing.T) {
	var names, links []string
	var bridge string
	t.Run("network", func(t *testing.T) {
		nw := New(t, 2)
		bridge = nw.bridge
		links = append(links, bridge)
		for i, h := range nw.Hosts {
			names = append(names, h.Namespace)
			links = append(links, fmt.Sprintf("%s%sv%d", namePrefix, nw.tag, i+1))
		}
		if !listed(t, "netns", "list", names[0]) || !listed(t, "-o", "link", "show", bridge) {
			t.Fatalf("the network's namespace %s or bridge %s is not there while the test runs", names[0], bridge)
		}
	})
	if bridge == "" {
		t.Skip("the network could not be made")
	}
	for _, ns := range names {
		if listed(t, "netns", "list", ns) {
			t.Errorf("namespace %s is still there after its test ended", ns)
		}
	}
	for _, link := range links {
		if listed(t, "-o", "link", "show", link) {
			t.Errorf("link %s is still there after its test ended", link)
		}
	}
}

// TestRemoveStaleRemovesWhatDeadProcessesLeft: a namespace and a bridge named after a process
// that is gone (as a test run killed before its cleanup leaves them) are removed by
// RemoveStale, which every New calls; those of a live process stay.
func TestRemoveStaleRemovesWhatDeadProcessesLeft(t *testing.T) {
	New(t, 0) // skips where namespaces cannot be made
	ip, _ := ipCommand()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("%s%xz", namePrefix, gone.Process.Pid)
	live := fmt.Sprintf("%s%xz", namePrefix, os.Getpid())
	for _, tag := range []string{dead, live} {
		must(t, run(ip, "netns", "add", tag+"-h1"))
		must(t, run(ip, "link", "add", tag+"b", "type", "bridge"))
	}
	t.Cleanup(func() {
		_ = run(ip, "netns", "del", live+"-h1")
		_ = run(ip, "link", "del", live+"b")
	})

	RemoveStale()
	if listed(t, "netns", "list", dead+"-h1") || listed(t, "-o", "link", "show", dead+"b") {
		t.Errorf("the namespace or bridge of the dead process %d survived RemoveStale", gone.Process.Pid)
	}
	if !listed(t, "netns", "list", live+"-h1") || !listed(t, "-o", "link", "show", live+"b") {
		t.Errorf("RemoveStale removed the namespace or bridge of this live process")
	}
}

// listed reports whether `ip args...` lists name (as a whole word).
func listed(t *testing.T, args ...string) bool {
	t.Helper()
	ip, err := ipCommand()
	if err != nil {
		t.Fatal(err)
	}
	name := args[len(args)-1]
	out, err := exec.Command(ip, args[:len(args)-1]...).Output()
	if err != nil {
		t.Fatalf("ip %v: %v", args, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			f, _, _ = strings.Cut(strings.TrimSuffix(f, ":"), "@")
			if f == name {
				return true
			}
		}
	}
	return false
}
