package app

import (
	"errors"
	"fmt"

	"github.com/kube-sunset/sunset/aggregate"
	"github.com/kube-sunset/sunset/config"
	"github.com/kube-sunset/sunset/ops"
	"github.com/kube-sunset/sunset/store"
)

// Reason codes of a not-ready answer: what an unauthenticated probe may
// learn. The detail goes to the log and to callers allowed to read.
const (
	notReadyStarting = "starting"
	notReadyStopping = "stopping"
	notReadyDisk     = "disk"
	notReadyKafka    = "kafka"
	notReadyFleet    = "fleet"
)

// readinessChecks are the components whose readiness is Sunset's, in the
// order they are asked: the disk, then Kafka (the consumer of the audit
// topics, the fleet's filter included), then the fleet's count. Each
// reports its own detail, typed: none is read back out of error text.
func (a *App) readinessChecks() []ops.Check {
	checks := []ops.Check{{Name: notReadyDisk, Ready: a.diskReady}}
	if a.kafka != nil {
		checks = append(checks, ops.Check{Name: notReadyKafka, Ready: a.kafka.Ready})
	}
	if a.fleet != nil {
		checks = append(checks, ops.Check{Name: notReadyFleet, Ready: a.fleet.Ready})
	}
	return checks
}

// diskReady is the store's check of free space: a *store.SpaceError says
// what is short.
func (a *App) diskReady() (bool, string) {
	err := a.store.CheckSpace()
	if err == nil {
		return true, ""
	}
	if se, ok := errors.AsType[*store.SpaceError](err); ok {
		return false, se.Detail()
	}
	return false, err.Error()
}

// readiness says whether Sunset accepts and commits events, and if not
// why: a reason code and its detail.
func (a *App) readiness() ops.Readiness {
	switch state(a.state.Load()) {
	case stateStarting:
		return ops.Readiness{Reason: notReadyStarting}
	case stateDraining:
		return ops.Readiness{Reason: notReadyStopping}
	}
	return ops.Evaluate(a.checks)
}

// probeReadiness is readiness for /-/ready and the sunset_ready gauge: it
// logs each change of reason or detail once, so that the detail a probe
// no longer shows is in the log.
func (a *App) probeReadiness() ops.Readiness {
	r := a.readiness()
	a.readyMu.Lock()
	changed := r.OK != a.lastReady.OK || r.Reason != a.lastReady.Reason || r.Detail != a.lastReady.Detail
	a.lastReady = r
	a.readyMu.Unlock()
	r.Warnings = append(r.Warnings, a.managedWarnings()...)
	if a.kafka != nil {
		r.Warnings = append(r.Warnings, a.kafka.Warnings()...)
	}
	if a.exemptions != nil {
		if err := a.exemptions.Problem(); err != nil {
			r.Warnings = append(r.Warnings, err.Error())
		}
	}
	for _, c := range a.agg.ClustersWithoutReads() {
		r.Warnings = append(r.Warnings, fmt.Sprintf("cluster %s sent no get, list or watch in %s: its reads are not logged, "+
			"so deprecated reads cannot be seen (see inputs/managed.md#reads)", c, config.ShortDuration(aggregate.ReadsWindow)))
	}
	// Starting and stopping are told by their own lines.
	switch {
	case changed && r.Detail != "":
		a.log.Warn().Str("reason", r.Reason).Str("detail", r.Detail).Msg("not ready")
	case changed && r.OK && state(a.state.Load()) == stateReady:
		a.log.Info().Msg("ready")
	}
	return r
}
