package netns

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// namePrefix starts the name of every bridge, veth and namespace the package makes. After it
// come the owning test process's id in hex and a letter from g to z that tells apart the
// networks one process makes (so the id's end is never ambiguous), then what the thing is: "b"
// for the bridge, "v" and the host's number for a host's veth, "-h" and the number for its
// namespace. Interface names stay within the kernel's 15 bytes.
const namePrefix = "tgm"

// subnetPrefix is the first two octets of every network's /24; the third is chosen at random
// among those no interface of the machine uses.
const subnetPrefix = "10.231."

// sequence numbers the networks of this process.
var sequence atomic.Uint32

// Network is a private network of test hosts: a bridge in the test's own network namespace,
// with the address Gateway, and the hosts, each in a network namespace of its own with an
// address on Subnet. It is removed when the test that made it ends.
type Network struct {
	// Subnet is the network's /24.
	Subnet netip.Prefix
	// Gateway is the bridge's address, in the test's namespace: the hosts reach the test's
	// services there, and it is their default route.
	Gateway netip.Addr
	// Hosts are the network's hosts, h1 first.
	Hosts []*Host

	ip     string
	tag    string
	bridge string
}

// Host is one host of a Network: a network namespace with one interface (eth0) on the
// network's bridge and its own loopback.
type Host struct {
	// Name is the host's name in the test: h1, h2 and so on.
	Name string
	// Namespace is the name of its network namespace (as `ip netns list` shows it).
	Namespace string
	// Addr is its address on the network.
	Addr netip.Addr

	ip string
}

// New makes a network of n hosts for the calling test and removes it when the test ends. It
// first removes what earlier test processes, now gone, left behind. Where namespaces cannot
// be made (not root, no iproute2, no permission), it skips the test with the reason, or fails
// it when the CI environment variable is "true".
func New(t testing.TB, n int) *Network {
	t.Helper()
	ip, err := ipCommand()
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("network namespaces need root")
	}
	if err != nil {
		unavailable(t, err)
	}
	RemoveStale()

	tag := fmt.Sprintf("%x%c", os.Getpid(), 'g'+rune(sequence.Add(1)%20))
	subnet, err := freeSubnet(ip)
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	nw := &Network{
		Subnet:  subnet,
		Gateway: subnet.Addr().Next(),
		ip:      ip,
		tag:     tag,
		bridge:  namePrefix + tag + "b",
	}
	if err := run(ip, "link", "add", nw.bridge, "type", "bridge"); err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := run(ip, "link", "del", nw.bridge); err != nil {
			t.Errorf("netns: remove the bridge: %v", err)
		}
	})
	must(t, run(ip, "addr", "add", nw.Gateway.String()+"/24", "dev", nw.bridge))
	must(t, run(ip, "link", "set", nw.bridge, "up"))

	addr := nw.Gateway
	for i := 1; i <= n; i++ {
		addr = addr.Next()
		nw.Hosts = append(nw.Hosts, nw.addHost(t, i, addr))
	}
	return nw
}

// addHost makes host number i, with address addr.
func (nw *Network) addHost(t testing.TB, i int, addr netip.Addr) *Host {
	t.Helper()
	h := &Host{
		Name:      "h" + strconv.Itoa(i),
		Namespace: fmt.Sprintf("%s%s-h%d", namePrefix, nw.tag, i),
		Addr:      addr,
		ip:        nw.ip,
	}
	veth := fmt.Sprintf("%s%sv%d", namePrefix, nw.tag, i)
	must(t, run(nw.ip, "netns", "add", h.Namespace))
	t.Cleanup(func() {
		if err := run(nw.ip, "netns", "del", h.Namespace); err != nil {
			t.Errorf("netns: remove the namespace of %s: %v", h.Name, err)
		}
	})
	must(t, run(nw.ip, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.Namespace))
	// Deleting one end deletes the pair. The namespace's deletion would too, but only once the
	// kernel has dismantled the namespace, a moment later: the veth goes first, at once.
	t.Cleanup(func() {
		if err := run(nw.ip, "link", "del", veth); err != nil {
			t.Errorf("netns: remove the veth of %s: %v", h.Name, err)
		}
	})
	must(t, run(nw.ip, "link", "set", veth, "master", nw.bridge))
	must(t, run(nw.ip, "link", "set", veth, "up"))
	must(t, run(nw.ip, "-n", h.Namespace, "link", "set", "lo", "up"))
	must(t, run(nw.ip, "-n", h.Namespace, "addr", "add", addr.String()+"/24", "dev", "eth0"))
	must(t, run(nw.ip, "-n", h.Namespace, "link", "set", "eth0", "up"))
	must(t, run(nw.ip, "-n", h.Namespace, "route", "add", "default", "via", nw.Gateway.String()))
	return h
}

// Command returns a command that runs name with args on the host: in its network namespace
// (through `ip netns exec`, which execs name in its own place, so the command's process id is
// name's). Everything else (files, processes, the environment) is shared with the test.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command(h.ip, append([]string{"netns", "exec", h.Namespace, name}, args...)...)
}

// String names the host for test logs: its name and address.
func (h *Host) String() string { return h.Name + " (" + h.Addr.String() + ")" }

// RemoveStale removes the namespaces, bridges and veths this package made in test processes
// that are gone (killed before their cleanup ran). Those of live processes stay.
func RemoveStale() {
	ip, err := ipCommand()
	if err != nil {
		return
	}
	if out, err := exec.Command(ip, "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) > 0 && ownerGone(fields[0]) {
				_ = run(ip, "netns", "del", fields[0])
			}
		}
	}
	if out, err := exec.Command(ip, "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			// "12: tgm1a2bgv1@if2: <BROADCAST,...> ..."
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(fields[1], ":"), "@")
			if ownerGone(name) {
				_ = run(ip, "link", "del", name)
			}
		}
	}
}

// ownerGone reports whether name is one of this package's names and its process is gone.
func ownerGone(name string) bool {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r >= 'g' && r <= 'z' })
	if end <= 0 {
		return false
	}
	pid, err := strconv.ParseInt(rest[:end], 16, 32)
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(int(pid), 0), syscall.ESRCH)
}

// freeSubnet picks a 10.231.x.0/24 that no interface of the machine has an address in.
func freeSubnet(ip string) (netip.Prefix, error) {
	out, err := exec.Command(ip, "-4", "-o", "addr", "show").Output()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list the addresses: %w", err)
	}
	used := string(out)
	for range 64 {
		x := 1 + rand.IntN(254)
		if !strings.Contains(used, subnetPrefix+strconv.Itoa(x)+".") {
			return netip.MustParsePrefix(subnetPrefix + strconv.Itoa(x) + ".0/24"), nil
		}
	}
	return netip.Prefix{}, errors.New("no free " + subnetPrefix + "x.0/24")
}

// ipCommand finds iproute2's ip, also where PATH lacks the sbin directories.
func ipCommand() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("iproute2's ip is not installed")
}

// run runs ip with args and returns its output as the error when it fails.
func run(ip string, args ...string) error {
	out, err := exec.Command(ip, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
}

// unavailable skips the test because namespaces cannot be made, or fails it under CI=true.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("netns: cannot make network namespaces under CI=true: %v", err)
	}
	t.Skipf("netns: cannot make network namespaces here (%v); the multi-host tests need root and iproute2", err)
}
