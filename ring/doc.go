// Package ring owns the ring all-reduce of the trainers' gradients: the GPU ring
// over peer access and the CPU reference implementation of the same algorithm.
package ring
