package config

import (
	"errors"
	"time"
)

// Usage configures what happens to usage records as they age (issue 21; docs/operations.md,
// "Usage retention"). usage_records is partitioned by month; the gateway makes the partitions
// of the current month and the next PartitionsAhead months ahead of time, and, when
// RetentionMonths is set, archives each month older than that to a Parquet object in the
// dataset object store and drops its partition. The request log, the CSV export and statements
// read archived months from their objects.
type Usage struct {
	// RetentionMonths is how many whole months before the current one stay in PostgreSQL;
	// older months are archived. 0 (the default) keeps everything in PostgreSQL: archival is
	// off.
	RetentionMonths int `yaml:"retention_months"`
	// PartitionsAhead is how many months after the current one get their partition ahead of
	// time: 1 to 24; 0 (or unset) is the default, 2. (None ahead would still work: a new
	// month's first rows go to the default partition until its partition is made, which takes
	// them over; the default keeps that from happening.)
	PartitionsAhead int `yaml:"partitions_ahead"`
	// CheckInterval is how often each replica makes the partitions ahead and archives what is
	// due (default 1 h).
	CheckInterval time.Duration `yaml:"check_interval"`
}

// WithDefaults returns the section with its defaults filled in.
func (u Usage) WithDefaults() Usage {
	if u.PartitionsAhead == 0 {
		u.PartitionsAhead = 2
	}
	if u.CheckInterval == 0 {
		u.CheckInterval = time.Hour
	}
	return u
}

// Validate reports what is wrong with the section.
func (u Usage) Validate() error {
	var errs []error
	if u.RetentionMonths < 0 {
		errs = append(errs, errors.New("usage.retention_months must be 0 (keep everything) or a number of months"))
	}
	if u.PartitionsAhead < 0 || u.PartitionsAhead > 24 {
		errs = append(errs, errors.New("usage.partitions_ahead must be from 1 to 24 (0 or unset: the default, 2)"))
	}
	if u.CheckInterval < 0 || (u.CheckInterval > 0 && u.CheckInterval < time.Minute) {
		errs = append(errs, errors.New("usage.check_interval must be at least 1m"))
	}
	return errors.Join(errs...)
}
