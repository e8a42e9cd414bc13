package config

import (
	"testing"
	"time"
)

// TestUsageSection: the usage section defaults to keeping everything, with two months of
// partitions ahead checked hourly, and refuses a negative retention or a check interval under a
// minute.
func TestUsageSection(t *testing.T) {
	d := Usage{}.WithDefaults()
	if d.RetentionMonths != 0 || d.PartitionsAhead != 2 || d.CheckInterval != time.Hour {
		t.Errorf("defaults: %+v", d)
	}
	if err := (Usage{RetentionMonths: 6, CheckInterval: 10 * time.Minute}).Validate(); err != nil {
		t.Errorf("a valid section: %v", err)
	}
	for _, u := range []Usage{{RetentionMonths: -1}, {PartitionsAhead: -1}, {CheckInterval: time.Second}} {
		if err := u.Validate(); err == nil {
			t.Errorf("%+v was accepted", u)
		}
	}
}
