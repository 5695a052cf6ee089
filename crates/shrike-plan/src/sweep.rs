//! Saturation sweeps: a grid over connections or rate, iterations, server resource samples,
//! the throughput peak and knee, and baseline vs candidate.
