//go:build race

package parleybin

const race = true
