//go:build !race

package parleybin

const race = false
