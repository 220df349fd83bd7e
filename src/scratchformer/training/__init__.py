"""Training: label-smoothed loss, the Noam schedule, checkpoints, the trainer loop, distributed set-up."""
