package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuModel returns ", <model name>" from /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return ", " + strings.TrimSpace(v)
		}
	}
	return ""
}

// idleBefore samples the machine's CPU for d and describes how idle it was
// ("97% idle over 500ms before the run"), or "" where /proc/stat is
// missing. The figures of a run are only as good as the machine is quiet:
// other work on it shows up as latency spikes and lower rates.
func idleBefore(d time.Duration) string {
	idle0, total0, ok0 := cpuTimes()
	time.Sleep(d)
	idle1, total1, ok1 := cpuTimes()
	if !ok0 || !ok1 || total1 <= total0 {
		return ""
	}
	return fmt.Sprintf("%.0f%% idle over %s before the run", 100*float64(idle1-idle0)/float64(total1-total0), d)
}

// cpuTimes reads the idle and total jiffies of all CPUs from /proc/stat.
func cpuTimes() (idle, total int64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return idle, total, true
}
