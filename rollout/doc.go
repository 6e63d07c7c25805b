// Package rollout decides, one step at a time, how a Swarm service moves
// from the spec it runs to a new one by canary or blue/green release. It is
// pure: no Docker, no HTTP, no clock. The reconcile pass reads the swarm
// (the recorded State on the extra colour's labels, whether each colour is
// ready), asks the analysis for a Verdict, calls Decide, and makes the
// swarm and the router match the Decision. Because the State lives on the
// swarm and Decide reads no memory of its own, a controller that restarts
// mid-rollout takes it up at the recorded step.
//
// A service opts in with the rollout key of its x-flotilla field; Parse
// reads that value (compose calls it) and Spec.Value writes it back in one
// spelling.
//
// The two colours are ordinary services of the stack: the stable colour
// keeps the declared name, the extra colour is named by ColourName.
package rollout
