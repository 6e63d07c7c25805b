//go:build !race

package renderbox

const raceEnabled = false
