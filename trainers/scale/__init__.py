"""Scale-out: one run over several processes and machines.

- `distributed`    the process group (torchrun's environment, gloo or NCCL) and the collectives a step uses
- `sharding`       FSDP2 on a device mesh (replicate, shard, hybrid), whole copies gathered from shards
- `sharded_state`  sharded checkpoints (`torch.distributed.checkpoint`), resumable at another size
- `ray_cluster`    a run over several machines through a Ray cluster
- `remote`         ranks started by another program (the studio's worker) reporting back over a socket

Import the submodule you need; this package imports nothing.
"""
