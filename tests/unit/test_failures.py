"""Failure classification on real output: the labelled samples, lines captured here, and the root-cause traps.

Data (tests/data): `failure_logs.jsonl` is a copy of shared/failure_logs/sample.jsonl (38 excerpts from public issue
threads, labelled). shared/failure_logs/more.jsonl (96) is split by repository, fixed before any pattern was written:
a row is held out when int(sha256("ladder-holdout-1:" + its lower-cased repository), 16) % 100 < 30.
`failure_logs_more_dev.jsonl` (67) was used to write patterns; `failure_logs_more_heldout.jsonl` (29) to measure
(`python -m ladder.failures --eval`): 17/19 unambiguous at the first look; the two misses showed families missing
(torch's "Some NCCL operations have failed", Vulkan's ERROR_OUT_OF_DEVICE_MEMORY without its prefix), added from
public lines, so later figures on it are no longer unseen. `failure_logs/heldout.jsonl` (81, 66 unambiguous) was
gathered afterwards from 80 other repositories' threads and labelled before its first look (failure_logs/README.md
has that table: 60/66 unambiguous right); its misses' families were then added, so it too is development now.
`failure_logs/heldout_b.jsonl` (46, 39 unambiguous, 46 more repositories) was gathered and labelled after that, and
looked at once (36/39); its misses' families were added in turn. `failure_logs/heldout_c.jsonl` (33, 30 unambiguous,
33 more repositories) likewise after that: 29/30 at its first look; `failure_logs/heldout_d.jsonl` (52, 40
unambiguous, 49 more repositories, mostly RL and GPU-simulation stacks) likewise: 39/40 at its first look;
`failure_logs/heldout_e.jsonl` (34, 29 unambiguous, 34 more repositories: collective watchdogs, NCCL's bootstrap,
launchers' signal 9, XLA and cluster memory monitors, with their traps) likewise: 21/29 in status at its first look;
`failure_logs/heldout_f.jsonl` (40, 37 unambiguous, 40 more repositories: evictions by a node or a scheduler, requests
no card holds, libraries that cannot be loaded, a watchdog seen by its frames) likewise: 26/37 at its first look.
`captured/*.log` are real outputs of small torch programs
run on this CPU machine (torch 2.13), trimmed of unrelated lines but never edited; captured/README.md says how each
was made. `PUBLIC` below quotes lines from public issue threads for the patterns that neither of those shows.
"""

from __future__ import annotations

import json
import re

import pytest

from ladder.core.records import Confidence, Ending, Reason, Status
from ladder.failures import scoring, sizes
from ladder.failures.patterns import PATTERNS, status_of
from ladder.failures.rules import EVIDENCE_CHARS, as_json, classify, classify_text, find_hits
from tests.helpers import DATA

CAPTURED = DATA / "captured"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


SAMPLES = _rows("failure_logs.jsonl")
MORE_DEV = _rows("failure_logs_more_dev.jsonl")
COMMUNICATION = {Reason.NCCL_ERROR, Reason.NCCL_TIMEOUT, Reason.PEER_LOST}
FAMILIES = {
    "cuda_oom": {Reason.CUDA_OOM},
    "host_oom": {Reason.HOST_OOM},
    "nccl": COMMUNICATION,
    "other_error": {Reason.ERROR, Reason.OVERSIZED_ALLOC},
    "port_in_use": {Reason.PORT_IN_USE},
}
LABEL_STATUS = {
    "cuda_oom": Status.OOM_OR_NCCL,
    "host_oom": Status.OOM_OR_NCCL,
    "nccl": Status.OOM_OR_NCCL,
    "other_error": Status.ERROR,
    "port_in_use": Status.RETRY,
}

_DUPLICATE_GPU = (
    "a launch misconfiguration (two ranks on one GPU / invalid NCCL usage) fails the same way at every "
    "rung: `error` stops the profile, where `oom_or_nccl` would walk it down the whole ladder"
)
# Ambiguous samples where the classifier deliberately disagrees with the label (strict: a pass would be news).
DISPUTED = {
    "axolotl-3476-fsdp2-flag-bug-surfaces-as-nccl-timeout": (
        "the excerpt shows only a collective timeout; the FSDP2 flag bug behind it is not in the text"
    ),
    "horovod-3929-nccl-warn-duplicate-gpu-mpirun": _DUPLICATE_GPU,
    "d-fine-289-nccl-invalid-usage-duplicate-gpu": _DUPLICATE_GPU,
    "lightning-8139-invalid-usage-gpu-list-broken-pipe": _DUPLICATE_GPU,
}

# Real lines from public issue threads, exactly as posted, for patterns that no sample or capture shows.
PUBLIC = {
    "ms-swift-6301-torch-oom": (  # github.com/modelscope/ms-swift#6301
        Reason.CUDA_OOM,
        "[rank11]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.35 GiB. GPU 3 has a total "
        "capacity of 63.42 GiB of which 1.70 GiB is free. Process 2521735 has 474.00 MiB memory in use. Including "
        "non-PyTorch memory, this process has 60.30 GiB memory in use.",
    ),
    # a request no card holds is a size bug (here a corrupted size after a collective's timeout), not a shortage
    "nccl-1284-1eb": (  # github.com/NVIDIA/nccl#1284 (its title)
        Reason.OVERSIZED_ALLOC,
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory",
    ),
    "iim-28-cuda-error-oom": (  # github.com/taohan10200/IIM#28
        Reason.CUDA_OOM,
        "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other "
        "API call,so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    ),
    "brax-123-cuda-error-out-of-memory": (  # github.com/google/brax#123
        Reason.CUDA_OOM,
        "RuntimeError: INTERNAL: Failed to launch CUDA kernel: fusion_29 with block dimensions: 128x1x1 and grid "
        "dimensions: 1x1x1: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    ),
    "alphafold-1023-xla-resource-exhausted": (  # github.com/google-deepmind/alphafold#1023
        Reason.CUDA_OOM,
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "7406166528 bytes.",
    ),
    "mklpy-27-not-enough-memory": (  # github.com/IvanoLauriola/MKLpy#27
        Reason.HOST_OOM,
        "DefaultCPUAllocator: not enough memory: you tried to allocate 5077901088 bytes.",
    ),
    "ssd-tensorflow-8-bad-alloc": (  # github.com/ljanyst/ssd-tensorflow#8
        Reason.HOST_OOM,
        "[i] Creating the model...\nterminate called after throwing an instance of 'std::bad_alloc'\n"
        "  what():  std::bad_alloc\nAborted",
    ),
    "rvc-1882-gloo-reset-by-peer": (  # github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI#1882
        Reason.PEER_LOST,
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.92]:25266: "
        "Connection reset by peer",
    ),
    "segmenter-60-nccl-system-error": (  # github.com/rstrudel/segmenter#60
        Reason.NCCL_ERROR,
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, "
        "NCCL version 2.7.8\nncclSystemError: System call (socket, malloc, munmap, etc) failed.",
    ),
    "isaacgymenvs-26-rl-games-minibatch-assert": (  # github.com/isaac-sim/IsaacGymEnvs#26
        Reason.ERROR,
        "there is a AssertionError in a2c_common.py:  assert(self.batch_size%self.minibatch_size == 0)",
    ),
    "vllm-6042-illegal-memory-access-in-watchdog": (  # github.com/vllm-project/vllm#6042
        Reason.ERROR,
        "[rank3]:[E ProcessGroupNCCL.cpp:1414] [PG 2 Rank 3] Process group watchdog thread terminated with "
        "exception: CUDA error: an illegal memory access was encountered",
    ),
    "llamafactory-7396-stamped-watchdog": (  # github.com/hiyouga/LlamaFactory#7396
        Reason.NCCL_TIMEOUT,
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
        "Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
    ),
    # --- families the labelled samples do not show (issue 19): one real line each, as posted ---
    "flingbot-11-ray-task-killed-low-memory": (  # github.com/real-stanford/flingbot#11
        Reason.HOST_OOM,
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    ),
    "vqa-pytorch-47-thcudacheck-error-2": (  # github.com/Cadene/vqa.pytorch#47
        Reason.CUDA_OOM,
        "THCudaCheck FAIL file=/opt/conda/conda-bld/pytorch_1513368888240/work/torch/lib/THC/generic/THCStorage.c "
        "line=82 error=2 : out of memory\nSegmentation fault (core dumped)",
    ),
    "cmt-15-cuda-failed-with-error-2": (  # github.com/junjie18/CMT#15
        Reason.CUDA_OOM,
        "RuntimeError: TensorStorage /io/include/tensorview/tensor.h 168\n"
        "cuda failed with error 2 out of memory. use CUDA_LAUNCH_BLOCKING=1 to get correct traceback.",
    ),
    "dss-25-caffe-2-vs-0-out-of-memory": (  # github.com/houqb/DSS#25
        Reason.CUDA_OOM,
        "F0304 14:26:21.611594  4889 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 vs. 0)  out of memory",
    ),
    "cntk-220-cudnn-alloc-failed": (  # github.com/microsoft/CNTK#220
        Reason.CUDA_OOM,
        "cuDNN failure 2: CUDNN_STATUS_ALLOC_FAILED ; GPU=0 ; hostname=PTNUWCL5099642 ; expr=finder(calgo, algoPerf)",
    ),
    "moltenvk-1705-vk-out-of-device-memory": (  # github.com/KhronosGroup/MoltenVK#1705
        Reason.CUDA_OOM,
        "[mvk-error] VK_ERROR_OUT_OF_DEVICE_MEMORY: Could not allocate a host-coherent VkDeviceMemory of size "
        "[xxxxxxxxxx] bytes.",
    ),
    "gl-vs-vk-2-error-out-of-device-memory": (  # github.com/RippeR37/GL_vs_VK#2
        Reason.CUDA_OOM,
        "Caught runtime exception during test execution!\nvk::CommandBuffer::end: ErrorOutOfDeviceMemory",
    ),
    "vulkano-172-oom-error-out-of-device-memory": (  # github.com/vulkano-rs/vulkano#172
        Reason.CUDA_OOM,
        "thread '<main>' panicked at 'called `Result::unwrap()` on an `Err` value: OomError(OutOfDeviceMemory)', "
        "../src/libcore\\result.rs:746",
    ),
    "somiao-pinyin-10-zh-cn-killed": (  # github.com/crownpku/Somiao-Pinyin#10
        Reason.HOST_OOM,
        "  0%|                                        | 0/16733 [00:00<?, ?b/s]2019-11-05 15:38:21.301871: I "
        "tensorflow/stream_executor/dso_loader.cc:152] successfully opened CUDA library libcublas.so.10.0 locally\n"
        "已杀死",
    ),
    "ai-art-10-windows-port-in-use": (  # github.com/Adi-iitd/AI-Art#10
        Reason.PORT_IN_USE,
        "RuntimeError: Only one usage of each socket address (protocol/network address/port) is normally permitted.",
    ),
    "wenet-959-nccl-connect-refused-retrying": (  # github.com/wenet-e2e/wenet#959
        Reason.PEER_LOST,
        "NCCL INFO Call to connect returned Connection refused, retrying",
    ),
    "nccl-626-socket-message-truncated": (  # github.com/NVIDIA/nccl#626
        Reason.NCCL_ERROR,
        "transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 192.168.161.30<59210> message truncated :",
    ),
    "nccl-1176-bootstrap-message-truncated": (  # github.com/NVIDIA/nccl#1176
        Reason.NCCL_ERROR,
        "0: compute-st-p4de24xlarge-1:34639:36718 [5] bootstrap.cc:77 NCCL WARN Message truncated : received 256 "
        "bytes instead of 4",
    ),
    "tensorrt-llm-1670-nccl-cuda-failure": (  # github.com/NVIDIA/TensorRT-LLM#1670
        Reason.NCCL_ERROR,
        "VM-0-16-ubuntu:392:494 [2] enqueue.cc:54 NCCL WARN Cuda failure 'invalid resource handle'",
    ),
    "nccl-1235-socket-recv-failed": (  # github.com/NVIDIA/nccl#1235
        Reason.NCCL_ERROR,
        "ng30903:3063025:3066048 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x55a51966cc80",
    ),
    "paddle-14620-check-failed-ncclgroupend": (  # github.com/PaddlePaddle/Paddle#14620
        Reason.NCCL_ERROR,
        "F1125 15:44:39.266677 200102 nccl_helper.h:62] Check failed: dynload::ncclGroupEnd() == ncclSuccess (1 vs. 0)",
    ),
    "nccl-1657-tcpstore-eof-after-nccl-error": (  # github.com/NVIDIA/nccl#1657
        Reason.PEER_LOST,
        "[I323 21:57:08.462050602 TCPStoreLibUvBackend.cpp:120] [c10d - debug] Read callback failed. code:-4095 "
        "name:EOF desc:end of file",
    ),
    "sglang-20859-tcpstore-recvvalue-failed": (  # github.com/sgl-project/sglang#20859
        Reason.PEER_LOST,
        "[rank12]:[W318 10:00:41.915284135 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=135, "
        "addr=[sglang-0-1.sglang.default.svc.transwarp.local]:48750, remote=[sglang-0.default.pod.transwarp.local]"
        ":20000): Connection reset by peer",
    ),
    "diligentcore-398-vk-error-code-out-of-device-memory": (  # github.com/DiligentGraphics/DiligentCore#398 (title)
        Reason.CUDA_OOM,
        "VK Error Code: ERROR_OUT_OF_DEVICE_MEMORY",
    ),
    "transformers-22328-xla-tpu-attempting-to-reserve": (  # github.com/huggingface/transformers#22328
        Reason.CUDA_OOM,
        "2023-03-23 02:02:25.057202: E tensorflow/compiler/xla/xla_client/xla_util.cc:90]   OP_REQUIRES failed at "
        "tpu_execute_op.cc:266 : RESOURCE_EXHAUSTED: Attempting to reserve 10.51G at the bottom of memory. That was "
        "not possible. There are 8.97G free, 0B reserved, and 8.97G reservable.",
    ),
    "colabtools-5126-xla-attempting-to-allocate": (  # github.com/googlecolab/colabtools#5126
        Reason.CUDA_OOM,
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
        "allocate 129.50M. That was not possible. There are 78.17M free.; (0x0x0_HBM0)",
    ),
    "pytorch-xla-9524-xla-ran-out-of-memory": (  # github.com/pytorch/xla#9524
        Reason.CUDA_OOM,
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
        "memory space vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by 16.42M",
    ),
    "open-r1-multimodal-20-some-nccl-operations-failed": (  # github.com/EvolvingLMMs-Lab/open-r1-multimodal#20
        Reason.NCCL_ERROR,
        "[rank2]:[E220 01:25:08.728702337 ProcessGroupNCCL.cpp:681] [Rank 2] Some NCCL operations have failed or "
        "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.",
    ),
    "deepresearcher-16-exception-detected-by-watchdog": (  # github.com/GAIR-NLP/DeepResearcher#16
        Reason.NCCL_ERROR,
        "(WorkerDict pid=63294) [rank3]:[E416 20:40:12.986007770 ProcessGroupNCCL.cpp:1664] [PG 5 Rank 3] Exception "
        "(either an error or timeout) detected by watchdog at work: 8, last enqueued NCCL work: 10, last completed "
        "NCCL work: 7.",
    ),
    # --- lines of failure_logs/heldout.jsonl's misses at its first look, each backing the row written for its family
    # (so these rows are development now, not held out) ---
    "kohya-ss-1065-python-names-sigkill": (  # github.com/bmaltais/kohya_ss#1065
        Reason.HOST_OOM,
        "died with <Signals.SIGKILL: 9>",
    ),
    "rl-swarm-128-macos-shell-killed-9": (  # github.com/gensyn-ai/rl-swarm#128 (its title)
        Reason.HOST_OOM,
        "run_rl_swarm.sh: line 160: 91115 Killed: 9",
    ),
    "fastmaskrcnn-172-bare-killed-in-emphasis": (  # github.com/CharlesShang/FastMaskRCNN#172
        Reason.HOST_OOM,
        "iter 144: image-id:0254212, time:1.722(sec), regular_loss: 0.248765, total-loss 0.5882(0.0360, 0.5233, "
        "0.000000, 0.0289, 0.0000), instances: 3, batch:(16|85, 0|11, 0|0)\nlabels\n[]\nclasses\n['background']\n\n"
        "**Killed**",
    ),
    "paddle-serving-1160-compiler-killed": (  # github.com/PaddlePaddle/Serving#1160
        Reason.HOST_OOM,
        "c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.\n"
        "core/sdk-cpp/CMakeFiles/sdk-cpp.dir/build.make:292: recipe for target "
        "'core/sdk-cpp/CMakeFiles/sdk-cpp.dir/dense_service.pb.cc.o' failed\n"
        "make[2]: *** [core/sdk-cpp/CMakeFiles/sdk-cpp.dir/dense_service.pb.cc.o] Error 1",
    ),
    "v2ray-onekey-6-compiler-killed-zh-cn": (  # github.com/wulabing/V2Ray_ws-tls_bash_onekey#6
        Reason.HOST_OOM,
        "{standard input}: 错误：open CFI at the end of file; missing .cfi_endproc directive\n"
        "gcc: 致命错误：已杀死 signal terminated program cc1\n编译中断。\n"
        "make: *** [Makefile:390：src/jemalloc.sym.o] 错误 1",
    ),
    "syllabus-2020-1-1088-winerror-10048-es": (  # github.com/IIC2233/syllabus-2020-1#1088
        Reason.PORT_IN_USE,
        "self.socket_server.bind((self.host, self.port)) OSError: [WinError 10048]\n"
        "Solo se permite un uso de cada dirección de socket (protocolo/dirección de red/puerto)",
    ),
    # --- lines of failure_logs/heldout_b.jsonl's misses at its first look (development now, likewise) ---
    "openbmc-1887-kernel-killed-process-and-reaper": (  # github.com/openbmc/openbmc#1887
        Reason.HOST_OOM,
        "[ 4018.450000] Killed process 935 (python) total-vm:113656kB, anon-rss:102104kB, file-rss:0kB, shmem-rss:0kB\n"
        "[ 4022.980000] oom_reaper: reaped process 935 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    ),
    "landmark-65-killed-after-a-progress-bar": (  # github.com/InternLandMark/LandMark#65
        Reason.HOST_OOM,
        "Training with a single process on 1 GPUs.\n 20%|████                | 216/1063 [00:27<02:17,  6.17it/s]Killed",
    ),
    "edgeai-mmdetection-8-communicator-aborted": (  # github.com/TexasInstruments/edgeai-mmdetection#8 (its title)
        Reason.NCCL_ERROR,
        "RuntimeError: NCCL communicator was aborted on rank 1",
    ),
    # --- a family looked for after the second look: torch.multiprocessing.spawn reporting a child's SIGKILL ---
    "acumen-4-spawn-process-terminated-with-sigkill": (  # github.com/lyu-yx/ACUMEN#4
        Reason.HOST_OOM,
        "    raise ProcessExitedException(\n"
        "          └ <class 'torch.multiprocessing.spawn.ProcessExitedException'>\n\n"
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
    ),
    "hybrik-198-spawn-exception-terminated-with-sigkill": (  # github.com/jeffffffli/HybrIK#198
        Reason.HOST_OOM,
        "    (error_index, name)\nException: process 3 terminated with signal SIGKILL",
    ),
    # --- the line of failure_logs/heldout_c.jsonl's one unambiguous miss at its first look (development now) ---
    "simdino-15-gloo-connect-full-mesh-failed": (  # github.com/RobinWu218/SimDINO#15
        Reason.PEER_LOST,
        "[E314 16:42:10.528865173 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
        "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
    ),
    "llamafactory-6269-timeout-at-nccl-work": (  # github.com/hiyouga/LlamaFactory#6269
        Reason.NCCL_TIMEOUT,
        "[rank0]:[E1206 18:44:16.994932383 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 0] Timeout at NCCL work: 7753, last "
        "enqueued NCCL work: 7755, last completed NCCL work: 7752.",
    ),
    # --- the line of failure_logs/heldout_d.jsonl's one unambiguous miss at its first look (development now), and
    # the same family (c10d's store timing out while it waits for a key another rank should set) in other wordings ---
    "c-optim-10-store-get-socket-timeout": (  # github.com/kyleliang919/C-Optim#10
        Reason.PEER_LOST,
        "RuntimeError: [4] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
        "store by key '0', but store->get('0') got error: Socket Timeout\nException raised from doWait at "
        "/opt/conda/conda-bld/pytorch_1695392020195/work/torch/csrc/distributed/c10d/TCPStore.cpp:445 (most recent "
        "call first):",
    ),
    "kaito-135-idle-worker-store-get-socket-timeout": (  # github.com/kaito-project/kaito#135
        Reason.PEER_LOST,
        "[1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key "
        "'0', but store->get('0') got error: Socket Timeout\nException raised from recvBytes at "
        "/opt/pytorch/pytorch/torch/csrc/distributed/c10d/Utils.hpp:605 (most recent call first):",
    ),
    "pai-megatron-patch-468-dist-store-error-socket-timeout": (  # github.com/alibaba/Pai-Megatron-Patch#468 (title)
        Reason.PEER_LOST,
        "torch.distributed.DistStoreError: Socket Timeout",
    ),
    "pytorch-55571-tcpstore-wait-socket-timeout": (  # github.com/pytorch/pytorch#55571
        Reason.PEER_LOST,
        'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\nRuntimeError: Socket Timeout',
    ),
    "pytorch-131808-store-wait-timeout-keys": (  # github.com/pytorch/pytorch#131808
        Reason.PEER_LOST,
        "DistStoreError: wait timeout after 100ms, keys: /the_key",
    ),
    "pytorch-111805-store-waiting-for-workers": (  # github.com/pytorch/pytorch#111805
        Reason.PEER_LOST,
        "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 workers joined.",
    ),
    # --- the families of failure_logs/heldout_e.jsonl's misses at its first look, from other threads where they could
    # be found (the rows of that file are development now) ---
    # torch's NCCL watchdog itself hung (a collective or CUDA call that never returns), and its heartbeat monitor
    "llamafactory-8549-watchdog-got-stuck": (  # github.com/hiyouga/LlamaFactory#8549
        Reason.NCCL_TIMEOUT,
        "[rank2]:[E704 13:48:58.260494728 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
        "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
        "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, "
        "and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), "
        "or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout "
        "would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or "
        "disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free "
        "to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to "
        "debug the hang. ",
    ),
    "xdit-147-heartbeat-monitor-timed-out": (  # github.com/xdit-project/xDiT#147
        Reason.NCCL_TIMEOUT,
        "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 5 Rank 0] Heartbeat monitor timed out! Process will be terminated "
        "after dumping debug info. workMetaList_.size()=3",
    ),
    "ms-swift-7104-failure-detected-by-watchdog": (  # github.com/modelscope/ms-swift#7104
        Reason.NCCL_ERROR,
        "[rank1]:[E1218 01:59:12.853182951 ProcessGroupNCCL.cpp:2252] [PG ID 5 PG GUID 15 Rank 1]  failure detected by "
        "watchdog at work sequence id: 943 PG status: last enqueued work: 943, last completed work: 942",
    ),
    # NCCL's socket layer failing while the ranks bootstrap (NCCL 2.2 wrote "WARN" without "NCCL")
    "espnet-1940-nccl-warn-connect-failed-refused": (  # github.com/espnet/espnet#1940
        Reason.NCCL_ERROR,
        "tj1-asr-train-v100-13:941227:943077 [0] include/socket.h:390 NCCL WARN Connect to 10.38.10.112<21724> failed "
        ": Connection refused",
    ),
    "horovod-110-nccl-warn-call-to-connect-timed-out": (  # github.com/horovod/horovod#110
        Reason.NCCL_ERROR,
        "lf-solar-gpu9-pm:285594:285607 [0] include/socket.h:361 NCCL WARN Call to connect failed : Connection timed "
        "out",
    ),
    "nccl-tests-15-warn-call-to-connect-failed-nccl-2-2": (  # github.com/NVIDIA/nccl-tests#15
        Reason.NCCL_ERROR,
        "gpu-bql-144-103:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out",
    ),
    "returnn-1470-nccl-warn-call-to-bind-failed": (  # github.com/rwth-i6/returnn#1470
        Reason.NCCL_ERROR,
        "nd20-01:275975:275975 [0] misc/socket.cc:379 NCCL WARN Call to bind failed : Cannot assign requested address"
        "                                   ",
    ),
    "sglang-3820-nccl-warn-socket-poll-connect-no-route": (  # github.com/sgl-project/sglang#3820
        Reason.NCCL_ERROR,
        "node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> returned 113(No "
        "route to host) errno 115(Operation now in progress)",
    ),
    "ultralytics-7038-nccl-warn-bootstrap-no-socket-interface": (  # github.com/ultralytics/ultralytics#7038
        Reason.NCCL_ERROR,
        "SGES-DT279:22220:22220 [0] bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found",
    ),
    # a launch that gives NCCL's bootstrap the wrong ranks: the same at every rung, so no step-down
    "pytorch-46248-bootstrap-root-rank-count-mismatch": (  # github.com/pytorch/pytorch#46248
        Reason.ERROR,
        'Tracing that down via ` NCCL_DEBUG=INFO` reveals a warning "bootstrap.cc:190 NCCL WARN Bootstrap Root : '
        'mismatch in rank count from procs 6 : 3", which hints that 6 GPUs are available and hence expected but only 3 '
        "processes are started which is indeed what happens. See "
        "https://github.com/pytorch/pytorch/blob/v1.7.0-rc1/test/run_test.py#L181",
    ),
    "lightning-14986-bootstrap-root-rank-already-checked-in": (  # github.com/Lightning-AI/pytorch-lightning#14986
        Reason.ERROR,
        "hpc-25-14:18569:18835 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 ranks has already checked "
        "in",
    ),
    # an MPI launcher reporting a rank ended by SIGKILL (Open MPI, MPICH's hydra, MPICH's mpd)
    "mfem-3424-mpirun-exited-on-signal-9": (  # github.com/mfem/mfem#3424 (its title)
        Reason.HOST_OOM,
        "mpirun noticed that process rank 10 with PID 0 on node yosibash-pc exited on signal 9 (Killed).",
    ),
    "relion-112-mpirun-exited-on-signal-9": (  # github.com/3dem/relion#112
        Reason.HOST_OOM,
        "-------------------------------------\n"
        "mpirun noticed that process rank 4 with PID 0 on node localhost exited on signal 9 (Killed).\n"
        "-------------------------------------",
    ),
    "jukebox-155-mpich-exit-string-killed-signal-9": (  # github.com/openai/jukebox#155
        Reason.HOST_OOM,
        "=   EXIT CODE: 9\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n"
        "===================================================================================\n"
        "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)",
    ),
    "mpich-743-exit-status-killed-by-signal-9": (  # github.com/pmodels/mpich#743
        Reason.HOST_OOM,
        "Rank 0 in job 1 <system name>_65327  caused collective abort of all ranks\n\n"
        "            Exit status of rank 0: killed by signal 9",
    ),
    # TensorFlow's allocator naming the CPU as the device it could not allocate on: host memory
    "darkflow-873-tf-oom-on-the-cpu-device": (  # github.com/thtrieu/darkflow#873
        Reason.HOST_OOM,
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
        "shape[16,19,19,1024] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
    ),
    # SLURM's cgroup OOM handler killing a task, in its older and newer wordings, and srun's report of it
    "pybnf-118-slurm-oom-kill-events": (  # github.com/lanl/PyBNF#118
        Reason.HOST_OOM,
        "slurmstepd: error: Detected 2 oom-kill event(s) in step 3756240.batch cgroup.",
    ),
    "nextflow-5932-slurm-oom-kill-event-new-wording": (  # github.com/nextflow-io/nextflow#5932 (its title)
        Reason.HOST_OOM,
        "slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0.",
    ),
    "hafs-101-slurm-cgroup-handler-and-srun-task-out-of-memory": (  # github.com/hafs-community/HAFS#101
        Reason.HOST_OOM,
        "slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your processes may have "
        "been killed by the cgroup out-of-memory handler.\nsrun: error: Orion-01-01: task 4: Out Of Memory\n"
        "srun: Terminating job step 3495064.0\n"
        "slurmstepd: error: *** STEP 3495064.0 ON orion-01-01 CANCELLED AT 2021-10-27T19:35:36 ***",
    ),
    "snakemake-slurm-371-step-tasks-oom-killed": (  # github.com/snakemake/snakemake-executor-plugin-slurm#371
        Reason.HOST_OOM,
        "slurmstepd: error: Detected 2 oom_kill events in StepId=JOBID.13. Some of the step tasks have been OOM "
        "Killed.\n"
        "srun: error: NODE: task 0: Out Of Memory",
    ),
    "fondue-htr-5-srun-task-out-of-memory-on-a-gpu-node": (  # github.com/FoNDUE-HTR/Documentation#5 (its title)
        Reason.HOST_OOM,
        "`srun: error: gpu001: task 0: Out Of Memory`",
    ),
    # a node or a cluster scheduler ending a container for memory
    "kubernetes-131530-reason-oomkilled": (  # github.com/kubernetes/kubernetes#131530
        Reason.HOST_OOM,
        "State:          Terminated\n  Reason:       OOMKilled\n  Exit Code:    0",
    ),
    "sentry-charts-1470-node-low-on-memory": (  # github.com/sentry-kubernetes/charts#1470 (its title)
        Reason.HOST_OOM,
        "The node was low on resource: memory",
    ),
    "nomidot-306-node-had-memory-pressure": (  # github.com/paritytech/Nomidot#306
        Reason.HOST_OOM,
        "Pod The node had condition: [MemoryPressure].",
    ),
    # a shared library that cannot be loaded: an install error, whatever it names
    "nccl-tests-85-error-while-loading-libnccl": (  # github.com/NVIDIA/nccl-tests#85 (its title)
        Reason.ERROR,
        "./build/all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot open shared object file: "
        "No such file or directory",
    ),
    "gpa-detection-24-importerror-libcudart": (  # github.com/ChrisAllenMing/GPA-detection#24 (its title)
        Reason.ERROR,
        "ImportError: libcudart.so.9.0: cannot open shared object file: No such file or directory",
    ),
    "pytorch-131284-oserror-libcudart-12": (  # github.com/pytorch/pytorch#131284
        Reason.ERROR,
        "OSError: libcudart.so.12: cannot open shared object file: No such file or directory",
    ),
    "nccl-1180-undefined-symbol-ncclcommregister": (  # github.com/NVIDIA/nccl#1180 (its title)
        Reason.ERROR,
        "torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
    ),
    "pytorch-32638-undefined-symbol-throw-nccl-error": (  # github.com/pytorch/pytorch#32638
        Reason.ERROR,
        "ImportError: /usr/lib/python3.8/site-packages/torch/lib/libtorch_python.so: undefined symbol: "
        "_ZN5torch4cuda4nccl6detail16throw_nccl_errorE12ncclResult_t",
    ),
    "vllm-4312-failed-to-import-nccl-library": (  # github.com/vllm-project/vllm#4312 (its title)
        Reason.ERROR,
        "[Bug]: NameError: name 'ncclGetVersion' is not defined (or Failed to import NCCL library: Cannot find "
        "libnccl.so.2 in the system.)",
    ),
    "lwm-44-xla-unable-to-load-nccl-library": (  # github.com/LargeWorldModel/LWM#44
        Reason.ERROR,
        "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:134: NCCL operation ncclGetUniqueId(&id) failed: Unable "
        "to load NCCL library. Multi-GPU collectives will not work.. Last NCCL warning(error) log entry (may be "
        "unrelated) 'Unable to load NCCL library. Multi-GPU collectives will not work.'.",
    ),
    # torch's NCCL watchdog shown only by its frames: its timeout check, or the watchdog thread ending the process
    "sglang-1693-watchdog-frames-check-timeout": (  # github.com/sgl-project/sglang#1693
        Reason.NCCL_TIMEOUT,
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        "std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f3b6e71a8d2 in /usr/local/lib/python3.10/dist-packages/torch/lib/"
        "libtorch_cuda.so)\nframe #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3b6e721313 in "
        "/usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)\nframe #3: "
        "c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7f3b6e7236fc in /usr/local/lib/python3.10/dist-packages/"
        "torch/lib/libtorch_cuda.so)\n\nException raised from ncclCommWatchdog at "
        "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 (most recent call first):",
    ),
    "open-r1-620-exception-raised-from-check-timeout": (  # github.com/huggingface/open-r1#620
        Reason.NCCL_TIMEOUT,
        "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 (most "
        "recent call first):",
    ),
    "pytorch-126544-watchdog-frame-only": (  # github.com/pytorch/pytorch#126544
        Reason.NCCL_ERROR,
        "frame #6: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7fc91a85531c in /tmp/venv/lib/python3.10/"
        "site-packages/torch/lib/libtorch_cuda.so)",
    ),
    # a request many times the card (or no card's size at all): a size bug; a few times the card: a shortage
    "gaussian-splatting-587-67109892gib-on-23gib": (  # github.com/graphdeco-inria/gaussian-splatting#587
        Reason.OVERSIZED_ALLOC,
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 67109892.01 GiB. GPU 0 has a total capacty "
        "of 23.69 GiB of which 17.17 GiB is free. Including non-PyTorch memory, this process has 6.51 GiB memory in "
        "use.",
    ),
    "flashavatar-18-21355gib-no-capacity": (  # github.com/USTC3DV/FlashAvatar-code#18 (its title)
        Reason.OVERSIZED_ALLOC,
        "CUDA out of memory. Tried to allocate 21355.80 GiB.",
    ),
    "sd-webui-replacer-74-27gib-on-12gib": (  # github.com/light-and-ray/sd-webui-replacer#74
        Reason.CUDA_OOM,
        "    torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 27.12 GiB. GPU 0 has a total capacty "
        "of 11.99 GiB of which 0 bytes is free. Of the allocated memory 16.16 GiB is allocated by PyTorch, and "
        "144.59 MiB is reserved by PyTorch but unallocated.",
    ),
    "pixor-31-tf-17gib-from-device": (  # github.com/philip-huang/PIXOR#31 (its title)
        Reason.CUDA_OOM,
        "failed to allocate 17.79G (19104890880 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    ),
    "single-cell-tutorial-85-numpy-926gib": (  # github.com/theislab/single-cell-tutorial#85 (its title)
        Reason.HOST_OOM,
        "numpy.core._exceptions.MemoryError: Unable to allocate 926. GiB for an array with shape (6794880, 36601) and "
        "data type float32",
    ),
}

# Each captured log, the launcher's exit code that went with it, and the reason it proves.
CAPTURED_LOGS = {
    "host_default_cpu_allocator.log": (1, Reason.HOST_OOM, "DefaultCPUAllocator: can't allocate memory"),
    "python_memory_error.log": (1, Reason.HOST_OOM, "MemoryError"),
    "enomem_lazy_import.log": (1, Reason.HOST_OOM, "[Errno 12] Cannot allocate memory"),
    "shell_killed_dash.log": (137, Reason.HOST_OOM, "Killed"),
    "shell_killed_bash.log": (137, Reason.HOST_OOM, "Killed"),
    "torchrun_sigkill.log": (1, Reason.HOST_OOM, "failed (exitcode: -9)"),
    "gloo_peer_closed.log": (1, Reason.PEER_LOST, "Connection closed by peer"),
    # rank 1 died of SIGSEGV as it started; rank 0's lost peer after it is its consequence
    "torchrun_sigsegv.log": (1, Reason.ERROR, "failed (exitcode: -11) local_rank: 1"),
    "spawn_sigsegv.log": (1, Reason.ERROR, "process 1 terminated with signal SIGSEGV"),
    # a rank that exits 3 with nothing printed: torchrun's word on it, not its own traceback's lines
    "torchrun_rank_exit3.log": (1, Reason.ERROR, "failed (exitcode: 3) local_rank: 1"),
    "gloo_timeout.log": (1, Reason.NCCL_TIMEOUT, "Timed out waiting 2000ms for recv operation"),
    "store_timeout.log": (1, Reason.PEER_LOST, "waiting for clients. 1/2 clients joined"),
    "store_peer_died.log": (1, Reason.PEER_LOST, "Failed to recv, got 0 bytes"),
    "tcpstore_eaddrinuse.log": (1, Reason.PORT_IN_USE, "EADDRINUSE"),
    "tcpstore_eaddrinuse_legacy.log": (1, Reason.PORT_IN_USE, "Address already in use"),
    "cuda_oom_h200_torchrun.log": (1, Reason.CUDA_OOM, "CUDA out of memory. Tried to allocate 512.00 MiB"),
    # no failure pattern matches: the evidence is the program's own error line, not torchrun's footer
    "proxy_config_error.log": (1, Reason.ERROR, "config error: /tmp/bad/agent.yaml has no 'model'"),
}


def sample(sample_id: str) -> str:
    return next(s["text"] for s in SAMPLES if s["id"] == sample_id)


def captured(name: str) -> str:
    return (CAPTURED / name).read_text()


def real_error_file(message: str, timestamp: int) -> dict:
    """The captured error.json (torchrun's real format), with another message and time stamp."""
    data = json.loads(captured("gloo_peer_closed.error.json"))
    data["message"]["message"] = message
    data["message"]["extraInfo"]["timestamp"] = str(timestamp)
    return data


OOM_LINE = PUBLIC["ms-swift-6301-torch-oom"][1]
TIMEOUT_LINE = sample("stanford-alpaca-65-watchdog-allgather-exitcode-minus6").splitlines()[2]
EB_LINE = PUBLIC["nccl-1284-1eb"][1]
NCCL_CASCADE = "\n".join(
    [
        sample("stanford-alpaca-207-ncclremoteerror-net-ib"),
        sample("nccl-1405-net-ib-completion-error-12"),
        captured("gloo_peer_closed.log"),
    ]
)


# --- the table on every labelled sample ---


def _param(s: dict, disputed: dict[str, str]) -> object:
    marks = [pytest.mark.xfail(reason=disputed[s["id"]], strict=True)] if s["id"] in disputed else []
    return pytest.param(s, id=s["id"], marks=marks)


def _agrees_with_its_label(s: dict) -> None:
    verdict = classify_text(s["text"], s["exit_code"])
    assert verdict.reason in FAMILIES[s["label"]], verdict
    assert verdict.status is LABEL_STATUS[s["label"]]
    assert verdict.evidence and len(verdict.evidence) <= EVIDENCE_CHARS


@pytest.mark.parametrize("s", [_param(s, DISPUTED) for s in SAMPLES])
def test_sample(s: dict) -> None:
    _agrees_with_its_label(s)


def test_disputed_samples_are_few_and_ambiguous() -> None:
    ambiguous = {s["id"] for s in SAMPLES if s["ambiguous"]}
    assert len(SAMPLES) == 38
    assert len(DISPUTED) <= 4 and set(DISPUTED) <= ambiguous


# --- captured and public lines ---


@pytest.mark.parametrize("name", sorted(CAPTURED_LOGS))
def test_captured_log(name: str) -> None:
    exit_code, reason, proof = CAPTURED_LOGS[name]
    verdict = classify_text(captured(name), exit_code)
    assert (verdict.status, verdict.reason) == (status_of(reason), reason)
    assert proof in verdict.evidence


@pytest.mark.parametrize("case", sorted(PUBLIC))
def test_public_line(case: str) -> None:
    reason, text = PUBLIC[case]
    assert classify_text(text).reason is reason


def _alternatives(regex: str) -> list[str]:
    """The top-level `|` branches of a regex (not those inside a group or a class)."""
    branches, depth, start, i = [], 0, 0, 0
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            i += 1
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "|" and depth == 0:
            branches.append(regex[start:i])
            start = i + 1
        i += 1
    return [*branches, regex[start:]]


def test_every_pattern_branch_is_backed_by_a_real_line() -> None:
    corpus = [s["text"] for s in SAMPLES + MORE_DEV] + [captured(n) for n in CAPTURED_LOGS]
    corpus += [t for _, t in PUBLIC.values()]
    lines = [line for text in corpus for line in text.splitlines()]
    unbacked = [
        (row.source, branch)
        for row in PATTERNS
        for branch in _alternatives(row.regex.pattern)
        if not any(re.search(branch, line) for line in lines)
    ]
    assert unbacked == []


def test_a_rows_needles_are_in_every_real_line_it_matches() -> None:
    """A row with needles is skipped for a text holding none of them (speed): none may hide a real match."""
    corpus = [s["text"] for s in SAMPLES + MORE_DEV] + [captured(n) for n in CAPTURED_LOGS]
    lines = [line for text in corpus + [t for _, t in PUBLIC.values()] for line in text.splitlines()]
    needled = [row for row in PATTERNS if row.needles]
    assert len(needled) >= 4
    for row in needled:
        matched = [line for line in lines if row.regex.search(line)]
        assert matched and all(any(n in line.lower() for n in row.needles) for line in matched), row.source


def test_evidence_is_a_window_of_a_long_line() -> None:
    text = sample("stanford-alpaca-207-ncclremoteerror-net-ib")
    verdict = classify_text(text)
    assert len(text) > EVIDENCE_CHARS and len(verdict.evidence) <= EVIDENCE_CHARS
    assert "NCCL error" in verdict.evidence


# --- the root-cause traps ---


@pytest.mark.parametrize("oom_first", [True, False], ids=["oom-then-nccl", "nccl-lines-printed-first"])
def test_one_ranks_oom_outranks_the_nccl_cascade(oom_first: bool) -> None:
    text = f"{OOM_LINE}\n{NCCL_CASCADE}" if oom_first else f"{NCCL_CASCADE}\n{OOM_LINE}"
    verdict = classify_text(text, 1)
    assert (verdict.status, verdict.reason) == (Status.OOM_OR_NCCL, Reason.CUDA_OOM)
    assert "CUDA out of memory" in verdict.evidence


def test_memory_line_after_an_nccl_timeout_is_the_timeout() -> None:
    verdict = classify_text(f"{TIMEOUT_LINE}\n{EB_LINE}", 1)
    assert verdict.reason is Reason.NCCL_TIMEOUT
    assert "Watchdog caught collective operation timeout" in verdict.evidence


def test_memory_line_before_an_nccl_timeout_is_the_oom() -> None:
    assert classify_text(f"{OOM_LINE}\n{TIMEOUT_LINE}", 1).reason is Reason.CUDA_OOM


def test_an_absurd_request_is_a_size_bug_before_a_timeout_and_its_consequence_after_one() -> None:
    """More than any card holds is no shortage a smaller rung relieves; after a collective's timeout it is the
    timeout's corrupted size."""
    before = classify_text(f"{EB_LINE}\n{TIMEOUT_LINE}", 1)
    assert (before.status, before.reason) == (Status.ERROR, Reason.OVERSIZED_ALLOC)
    assert classify_text(f"{TIMEOUT_LINE}\n{EB_LINE}", 1).reason is Reason.NCCL_TIMEOUT


@pytest.mark.parametrize(
    "text, on_gpu, oversized",
    [
        ("Tried to allocate 1.50 TiB (GPU 0; 79.19 GiB total capacity; 1.2 GiB already allocated)", True, True),
        ("Tried to allocate 600.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 70 GiB is free", True, False),
        ("Tried to allocate 700.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 70 GiB is free", True, True),
        ("trying to allocate 133792483MiB", True, True),
        ("Tried to allocate 218.96 GiB", True, False),
        ("Unable to allocate 926. GiB for an array with shape (6794880, 36601)", False, False),
        ("Unable to allocate 70.0 TiB for an array with shape (10000000, 1000000)", False, True),
        ("Out of memory while trying to allocate 14285187448 bytes.", True, False),
        ("CUDA out of memory (no size in the line)", True, False),
    ],
    ids=[
        "19x-the-card",
        "7.6x-the-card",
        "8.8x-the-card",
        "127-TiB",
        "219-GiB-no-capacity",
        "926-GiB-host",
        "70-TiB-host",
        "xla-bytes",
        "no-size",
    ],
)
def test_an_oversized_request_is_many_times_the_stated_capacity(text: str, on_gpu: bool, oversized: bool) -> None:
    assert sizes.oversized(text, on_gpu) is oversized


CUDA_NEXT_LINES = {
    "cuda-kernel-errors-note": PUBLIC["iim-28-cuda-error-oom"][1].splitlines()[1],
    "cuda-oom-line": OOM_LINE,
}


@pytest.mark.parametrize("next_line", CUDA_NEXT_LINES.values(), ids=CUDA_NEXT_LINES.keys())
def test_host_allocator_failure_followed_by_a_cuda_line_is_host_oom(next_line: str) -> None:
    verdict = classify_text(f"{captured('host_default_cpu_allocator.log')}{next_line}\n", 1)
    assert verdict.reason is Reason.HOST_OOM
    assert "DefaultCPUAllocator" in verdict.evidence


def _fold_inside(line: str, phrase: str, keep: int) -> str:
    """`line` broken after the first `keep` characters of `phrase`, as a console or a paste wraps it."""
    cut = line.index(phrase) + keep
    return f"{line[:cut]}\n{line[cut:]}"


WRAPPED = {
    "cuda-out-of-mem|ory": (_fold_inside(OOM_LINE, "CUDA out of memory", 15), Reason.CUDA_OOM),
    "default-cpu-allocator-mem|ory": (
        _fold_inside(captured("host_default_cpu_allocator.log").splitlines()[-1], "can't allocate memory", 17),
        Reason.HOST_OOM,
    ),
    "folded-every-80-columns": ("\n".join(OOM_LINE[i : i + 80] for i in range(0, len(OOM_LINE), 80)), Reason.CUDA_OOM),
}


@pytest.mark.parametrize("case", WRAPPED.values(), ids=WRAPPED.keys())
def test_keyword_wrapped_onto_the_next_line_still_matches(case: tuple[str, Reason]) -> None:
    text, reason = case
    verdict = classify_text(text, 1)
    assert verdict.reason is reason
    assert "\n" not in verdict.evidence


@pytest.mark.parametrize(
    "assertion",
    [
        sample("stable-baselines-537-minibatch-divisibility-assert"),
        PUBLIC["isaacgymenvs-26-rl-games-minibatch-assert"][1],
    ],
    ids=["stable-baselines-537", "isaacgymenvs-26"],
)
def test_minibatch_divisibility_is_an_error_even_before_a_cascade(assertion: str) -> None:
    verdict = classify_text(f"{assertion}\n{captured('gloo_peer_closed.log')}", 1)
    assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
    assert "batch" in verdict.evidence


def test_illegal_memory_access_is_an_error_not_oom() -> None:
    text = f"{PUBLIC['vllm-6042-illegal-memory-access-in-watchdog'][1]}\n{TIMEOUT_LINE}"
    verdict = classify_text(text, 1)
    assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
    assert "illegal memory access" in verdict.evidence


def test_a_store_wait_timeout_is_a_lost_peer_but_a_store_client_that_cannot_connect_is_not() -> None:
    """Waiting for a key another rank should set is waiting for a peer; failing to reach the store at all is more
    often a wrong address or port (failure_logs/README.md), so it stops the profile instead of stepping down."""
    waited = classify_text(PUBLIC["c-optim-10-store-get-socket-timeout"][1], 1)
    assert (waited.status, waited.reason) == (Status.OOM_OR_NCCL, Reason.PEER_LOST)
    # github.com/vllm-project/vllm#19670 (its title)
    unreachable = (
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect "
        "to (172.17.0.9, 46229)."
    )
    assert classify_text(unreachable, 1).status is Status.ERROR


def test_memory_line_after_a_fatal_error_is_its_consequence() -> None:
    text = sample("isaacsim-555-warp-oom-symptom-egl-root-cause")
    assert classify_text(text).evidence.startswith("Warp CUDA error 101: invalid device ordinal")
    oom_only = "\n".join(text.splitlines()[3:])  # the same sample from its "Warp CUDA error 2: out of memory"
    assert classify_text(oom_only).reason is Reason.CUDA_OOM


# --- lines stay separate; launch faults and healthy warnings never step down ---

# github.com/NVIDIA/warp#960: the second line of Warp's banner at init
WARP_BANNER = "   CUDA Toolkit 12.8, Driver 13.0"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (WARP_BANNER, sample("isaacsim-555-warp-oom-symptom-egl-root-cause").splitlines()[3]),
        (PUBLIC["iim-28-cuda-error-oom"][1].splitlines()[1], OOM_LINE),
    ],
    ids=["warp-banner-then-warp-oom", "cuda-kernel-errors-note-then-torch-oom"],
)
def test_evidence_never_glues_a_line_to_the_next(first: str, second: str) -> None:
    """A line with a GPU word and the failure line after it are two lines, not one phrase wrapped by a terminal: the
    evidence is the failure's own line, never both run together ("...Driver 13.0Warp CUDA error 2: out of memory")."""
    text = f"{first}\n{second}\n"
    verdict = classify_text(text, 1)
    assert (verdict.status, verdict.reason) == (Status.OOM_OR_NCCL, Reason.CUDA_OOM)
    assert verdict.evidence in second
    assert all(hit.evidence in text.splitlines()[hit.line] for hit in find_hits(text))


# github.com/zai-org/ImageReward#65 (NCCL then uses the other devices), github.com/NVIDIA/nccl#444
HEALTHY_NCCL_WARN = (
    "65826-86bd789679-2dxbs:80744:80744 [1] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed\n"
    "65826-86bd789679-2dxbs:80746:80746 [3] transport/net_ib.cc:149 NCCL WARN NET/IB : Unable to open device mlx5_59\n"
    "[1] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"
)


def test_nccl_warn_lines_that_healthy_runs_print_are_no_step_down() -> None:
    assert classify_text(HEALTHY_NCCL_WARN, 1).status is Status.ERROR
    then_oom = classify_text(f"{HEALTHY_NCCL_WARN}\n{OOM_LINE}", 1)
    assert (then_oom.status, then_oom.reason) == (Status.OOM_OR_NCCL, Reason.CUDA_OOM)


def test_a_launch_with_the_wrong_ranks_stops_the_profile_before_its_refused_connections() -> None:
    """NCCL's bootstrap root seeing more or fewer ranks than it was told (or one rank twice) is a launch fault that
    fails alike at every rung; the refused connections that follow are its consequence."""
    refused = [
        PUBLIC[case][1]
        for case in ("wenet-959-nccl-connect-refused-retrying", "espnet-1940-nccl-warn-connect-failed-refused")
    ]
    for case in (
        "pytorch-46248-bootstrap-root-rank-count-mismatch",
        "lightning-14986-bootstrap-root-rank-already-checked-in",
    ):
        verdict = classify_text("\n".join([PUBLIC[case][1], *refused]), 1)
        assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
        assert "Bootstrap Root" in verdict.evidence


@pytest.mark.parametrize(
    "text",
    [
        # github.com/FedML-AI/FedML#588 (its title)
        "mpirun noticed that process rank 0 with PID 636815 on node fl98 exited on signal 11 (Segmentation fault)",
        # github.com/adda-team/adda#151, as pasted (wrapped)
        "mpiexec noticed that process rank 0 with PID 10313 on node proton exited on \nsignal 6 (Aborted).",
    ],
    ids=["signal-11", "signal-6-wrapped"],
)
def test_a_launcher_reporting_another_signal_is_no_kill(text: str) -> None:
    assert classify_text(text, 1).status is Status.ERROR


def test_a_stuck_watchdog_in_a_run_that_then_exits_cleanly_is_no_failure() -> None:
    """torch prints it when it only suspects a hang ("If you suspect the watchdog is not actually stuck"): it names the
    failure of a run that failed, and nothing in one that exited 0."""
    stuck = PUBLIC["llamafactory-8549-watchdog-got-stuck"][1]
    assert (classify_text(stuck, 1).status, classify_text(stuck, 0).status) == (Status.OOM_OR_NCCL, Status.OK)


def test_a_watchdog_ending_a_rank_for_an_illegal_access_stays_an_error() -> None:
    """The watchdog's hang and timeout lines are a communication failure; the same watchdog ending the process for a
    broken kernel names the kernel."""
    hang, broken = (
        PUBLIC["xdit-147-heartbeat-monitor-timed-out"][1],
        PUBLIC["vllm-6042-illegal-memory-access-in-watchdog"][1],
    )
    text = f"{hang}\n{broken}"
    assert classify_text(text, 1).status is Status.ERROR


# --- classify() on whole endings ---


@pytest.mark.parametrize(
    ("stopped_by", "status", "reason"),
    [
        ("interrupted", Status.INTERRUPTED, Reason.INTERRUPTED),
        ("stalled", Status.TIMEOUT, Reason.STALLED),
        ("trial_timeout", Status.TIMEOUT, Reason.TRIAL_TIMEOUT),
    ],
)
def test_ladders_own_stop_comes_first(stopped_by: str, status: Status, reason: Reason) -> None:
    verdict = classify(Ending(exit_code=-15, log_text=OOM_LINE, stopped_by=stopped_by))
    assert (verdict.status, verdict.reason) == (status, reason)


@pytest.mark.parametrize(
    ("log_text", "exit_code", "reason"),
    [
        ("step 100 reward 1.5\n", -9, Reason.NONE),  # ladder's own SIGKILL after the grace period
        ("step 100\nValueError: handled and logged, training went on\n", 1, Reason.NONE),
        (f"step 100\n{OOM_LINE}\n", 1, Reason.CUDA_OOM),
    ],
    ids=["clean-log-killed-by-ladder", "unrecognised-exception", "oom-in-window"],
)
def test_window_done_is_ok_unless_the_logs_show_a_failure(log_text: str, exit_code: int, reason: Reason) -> None:
    verdict = classify(Ending(exit_code=exit_code, log_text=log_text, stopped_by="window_done"))
    assert (verdict.status, verdict.reason) == (status_of(reason), reason)


@pytest.mark.parametrize(
    ("fatal_at", "oom_at", "reason"),
    [
        (1700000001, 1700000005, Reason.ERROR),
        (1700000005, 1700000001, Reason.CUDA_OOM),
    ],
    ids=["fatal-earlier", "oom-earlier"],
)
def test_earliest_error_file_is_the_root_cause(fatal_at: int, oom_at: int, reason: Reason) -> None:
    files = (
        real_error_file(PUBLIC["vllm-6042-illegal-memory-access-in-watchdog"][1], fatal_at),
        real_error_file(OOM_LINE, oom_at),
    )
    verdict = classify(Ending(exit_code=1, log_text=NCCL_CASCADE, error_files=files))
    assert verdict.reason is reason


def test_error_file_with_a_plain_string_message() -> None:
    files = ({"message": "ValueError: num_envs must be a power of two", "timestamp": 1700000000},)
    verdict = classify(Ending(exit_code=1, error_files=files))
    assert (verdict.reason, verdict.evidence) == (Reason.ERROR, "ValueError: num_envs must be a power of two")


def test_error_file_showing_a_symptom_yields_to_memory_in_a_rank_log() -> None:
    files = (json.loads(captured("gloo_peer_closed.error.json")),)
    verdict = classify(Ending(exit_code=1, error_files=files, rank_logs={1: OOM_LINE}))
    assert verdict.reason is Reason.CUDA_OOM


def test_oom_then_nccl_cascade_across_rank_logs() -> None:
    logs = {
        0: NCCL_CASCADE,
        1: f"step 7\n{OOM_LINE}\n{sample('stanford-alpaca-207-ncclremoteerror-net-ib')}",
        2: sample("diffusers-12422-blocking-wait-timeout"),
    }
    verdict = classify(Ending(exit_code=1, rank_logs=logs, log_text=NCCL_CASCADE))
    assert (verdict.status, verdict.reason) == (Status.OOM_OR_NCCL, Reason.CUDA_OOM)


def test_earliest_failing_rank_wins_where_every_failing_line_is_stamped() -> None:
    minimind_oom = sample("minimind-845-cachingallocator-oom-warnings").splitlines()[1]  # [W906 15:02:06 ...]
    march_timeout = PUBLIC["llamafactory-7396-stamped-watchdog"][1]  # [E321 02:07:08 ...]
    verdict = classify(Ending(exit_code=1, rank_logs={0: minimind_oom, 1: march_timeout}))
    assert verdict.reason is Reason.NCCL_TIMEOUT


@pytest.mark.parametrize("log_text", ["", captured("gloo_peer_closed.log")], ids=["empty-log", "peer-lost-log"])
def test_cgroup_oom_kills_are_host_oom(log_text: str) -> None:
    verdict = classify(Ending(exit_code=1, log_text=log_text, oom_kills=2))
    assert (verdict.status, verdict.reason) == (Status.OOM_OR_NCCL, Reason.HOST_OOM)
    assert "2 OOM kill" in verdict.evidence


@pytest.mark.parametrize(
    ("exit_code", "status", "reason", "evidence"),
    [
        (-9, Status.OOM_OR_NCCL, Reason.HOST_OOM, "exit code -9 (SIGKILL)"),
        (137, Status.OOM_OR_NCCL, Reason.HOST_OOM, "exit code 137 (SIGKILL)"),
        (0, Status.OK, Reason.NONE, "exit code 0"),
        (1, Status.ERROR, Reason.ERROR, "exit code 1"),
        (-6, Status.ERROR, Reason.ERROR, "exit code -6 (SIGABRT)"),
        (None, Status.ERROR, Reason.ERROR, "no exit code and no failure line"),
    ],
)
def test_exit_code_with_empty_text(exit_code: int | None, status: Status, reason: Reason, evidence: str) -> None:
    verdict = classify_text("", exit_code)
    assert (verdict.status, verdict.reason, verdict.evidence) == (status, reason, evidence)


def test_sigkill_exit_outranks_a_peer_lost_log() -> None:
    assert classify_text(captured("gloo_peer_closed.log"), -9).reason is Reason.HOST_OOM


def test_clean_exit_ignores_an_unrecognised_exception_line() -> None:
    assert classify_text("KeyError: 'reward' (logged and skipped)\ndone\n", 0).status is Status.OK


def test_unrecognised_failure_is_an_error_with_the_last_line() -> None:
    verdict = classify_text(sample("deepspeed-5570-rank1-size-mismatch"), 1)
    assert verdict.reason is Reason.ERROR
    assert verdict.evidence.startswith("[rank1]:        size mismatch for model.layers.21.input_layernorm.weight")


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        (Reason.CUDA_OOM, Status.OOM_OR_NCCL),
        (Reason.HOST_OOM, Status.OOM_OR_NCCL),
        (Reason.NCCL_ERROR, Status.OOM_OR_NCCL),
        (Reason.NCCL_TIMEOUT, Status.OOM_OR_NCCL),
        (Reason.PEER_LOST, Status.OOM_OR_NCCL),
        (Reason.PORT_IN_USE, Status.RETRY),
        (Reason.ERROR, Status.ERROR),
    ],
)
def test_status_of(reason: Reason, status: Status) -> None:
    assert status_of(reason) is status


# --- the CLI ---


def test_tied_error_file_stamps_blame_the_failure_not_the_peer_that_lost_it() -> None:
    """Captured: rank 1's KeyError and rank 0's gloo 'Connection closed by peer' stamped in the same second."""
    folder = DATA / "captured" / "keyerror_tie"
    files = tuple(json.loads((folder / f"rank{r}_error.json").read_text()) for r in (0, 1))
    assert files[0]["message"]["extraInfo"]["timestamp"] == files[1]["message"]["extraInfo"]["timestamp"]
    for ordered in (files, files[::-1]):
        verdict = classify(Ending(exit_code=1, error_files=ordered))
        assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
        assert "KeyError" in verdict.evidence


def test_enomem_while_importing_under_the_cap_is_host_oom() -> None:
    """Captured: a rank's lazy import failed under the emulated cap (RLIMIT_DATA) while the other rank's import
    died with CPython's 'SystemError: error return without exception set': the memory line is the cause."""
    line = (DATA / "captured" / "enomem_lazy_import.log").read_text()
    text = "[rank0]: SystemError: error return without exception set\n" + line
    verdict = classify_text(text, 1)
    assert (verdict.status, verdict.reason) == (Status.OOM_OR_NCCL, Reason.HOST_OOM)
    assert "Cannot allocate memory" in verdict.evidence


# --- the development part of shared/failure_logs/more.jsonl (issue 19) ---

# Ambiguous excerpts where the classifier deliberately disagrees with the label (strict: a pass would be news).
DISPUTED_MORE = {
    "deeplearningexamples-1386-nccl-shm-segment-onnxruntime-conflict": (
        "the excerpt shows only NCCL's unhandled system error; the library conflict behind it is not in the text"
    ),
    "distrifuser-13-nccl-error-5-invalid-usage-graph-capture": _DUPLICATE_GPU,
    "gfpgan-154-nccl-invalid-usage": _DUPLICATE_GPU,
    "humannerf-87-wsl-pci-bus-real-path-nccl-warn": (
        "NCCL WARN lines are printed by healthy runs too; without a named NCCL failure the run is not stepped down"
    ),
    "mmsegmentation-2085-dataloader-killed-by-terminated": "SIGTERM is not the OOM killer's signal",
    "mujoco-2236-mjx-rematerialization-buried-in-warnings": (
        "XLA's rematerialization warning is not a failure; the run's own error line is a parse error"
    ),
}


@pytest.mark.parametrize("s", [_param(s, DISPUTED_MORE) for s in MORE_DEV])
def test_more_sample(s: dict) -> None:
    _agrees_with_its_label(s)


def test_disputed_more_samples_are_ambiguous_and_never_a_false_step_down_on_a_clear_log() -> None:
    ambiguous = {s["id"] for s in MORE_DEV if s["ambiguous"]}
    assert set(DISPUTED_MORE) <= ambiguous
    for s in MORE_DEV:
        if s["label"] == "other_error" and not s["ambiguous"]:
            assert classify_text(s["text"], s["exit_code"]).status is Status.ERROR, s["id"]


# --- confidence ---


def more(sample_id: str) -> str:
    return next(s["text"] for s in MORE_DEV if s["id"] == sample_id)


@pytest.mark.parametrize(
    ("text", "exit_code", "reason"),
    [
        (more("isaaclab-1389-patch-buffer-after-collision-stack"), None, Reason.CUDA_OOM),
        (more("mujoco-playground-200-warp-nefc-overflow-njmax"), None, Reason.CUDA_OOM),
        (more("ale-583-dreamerv2-breakout-killed"), None, Reason.HOST_OOM),
        (PUBLIC["somiao-pinyin-10-zh-cn-killed"][1], None, Reason.HOST_OOM),
        (PUBLIC["rl-swarm-128-macos-shell-killed-9"][1], None, Reason.HOST_OOM),
        (PUBLIC["paddle-serving-1160-compiler-killed"][1], 2, Reason.HOST_OOM),
        (PUBLIC["kohya-ss-1065-python-names-sigkill"][1], 1, Reason.HOST_OOM),
        (PUBLIC["landmark-65-killed-after-a-progress-bar"][1], None, Reason.HOST_OOM),
        (PUBLIC["acumen-4-spawn-process-terminated-with-sigkill"][1], 1, Reason.HOST_OOM),
        (PUBLIC["mfem-3424-mpirun-exited-on-signal-9"][1], 1, Reason.HOST_OOM),
        ("", -9, Reason.HOST_OOM),
        ("", 137, Reason.HOST_OOM),
    ],
    ids=[
        "physx-patch-buffer",
        "mujoco-warp-njmax",
        "bare-killed",
        "bare-killed-zh-cn",
        "shell-killed-9-macos",
        "compiler-killed",
        "python-signals-sigkill",
        "killed-after-progress-bar",
        "spawn-child-sigkill",
        "mpirun-rank-exited-on-signal-9",
        "exit-minus-9",
        "exit-137",
    ],
)
def test_weak_evidence_gives_a_low_confidence_verdict_with_its_basis(
    text: str, exit_code: int | None, reason: Reason
) -> None:
    verdict = classify_text(text, exit_code)
    assert (verdict.status, verdict.reason, verdict.confidence) == (Status.OOM_OR_NCCL, reason, Confidence.LOW)
    assert verdict.basis


def test_the_kernels_own_evidence_makes_a_bare_kill_certain() -> None:
    text = more("ale-583-dreamerv2-breakout-killed")
    counted = classify(Ending(exit_code=-9, log_text=text, oom_kills=1))
    assert (counted.reason, counted.confidence, counted.basis) == (Reason.HOST_OOM, Confidence.HIGH, "")
    dmesg = "Out of memory: Killed process 26931 (python) total-vm:36417768kB, anon-rss:15300516kB"
    in_log = classify_text(f"{text}\n{dmesg}", -9)
    assert (in_log.reason, in_log.confidence) == (Reason.HOST_OOM, Confidence.HIGH)


@pytest.mark.parametrize(
    "text",
    [
        OOM_LINE,
        sample("stanford-alpaca-207-ncclremoteerror-net-ib"),
        captured("gloo_peer_closed.log"),
        PUBLIC["openbmc-1887-kernel-killed-process-and-reaper"][1],
        PUBLIC["hafs-101-slurm-cgroup-handler-and-srun-task-out-of-memory"][1],
        PUBLIC["llamafactory-8549-watchdog-got-stuck"][1],
    ],
)
def test_named_failures_are_certain(text: str) -> None:
    verdict = classify_text(text, 1)
    assert (verdict.confidence, verdict.basis) == (Confidence.HIGH, "")


def test_verdict_json_carries_the_confidence() -> None:
    data = as_json(classify_text("", -9))
    assert data["status"] == "oom_or_nccl" and data["confidence"] == "low" and "SIGKILL" in data["basis"]


# --- a launcher that returns 0 after its program died of an exception ---


def test_launcher_returning_zero_after_an_uncaught_exception_is_an_error() -> None:
    verdict = classify_text(more("deepspeed-618-nameerror-launcher-returns-0"), 0)
    assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
    assert verdict.evidence == "NameError: name 'garbageeeeee' is not defined"


def test_a_traceback_the_program_survived_is_not_an_error_after_exit_zero() -> None:
    text = more("deepspeed-618-nameerror-launcher-returns-0") + "\nepoch 3 reward 0.9\ntraining done"
    assert classify_text(text, 0).status is Status.OK


# --- the pure part stays pure ---


# --- python -m ladder.failures --eval ---


# --- python -m ladder.failures <trial folder> reports the trial's own verdict ---


def test_the_acceptance_bar_on_every_labelled_unambiguous_row() -> None:
    """Issue 19's bar (>= 98% right status, >= 90% right reason, no false step-down) on every labelled row that a
    careful reader labels one way: the 134 shared rows and failure_logs/heldout*.jsonl (all of them measured once
    already, so here they guard against regressions)."""
    rows = SAMPLES + MORE_DEV + _rows("failure_logs_more_heldout.jsonl") + HELDOUT + HELDOUT_B + HELDOUT_C + HELDOUT_D
    rows += HELDOUT_E + HELDOUT_F
    scored = [s for s in scoring.score(rows) if not s.ambiguous]
    assert len(rows) == 134 + 81 + 46 + 33 + 52 + 34 + 40 and len(scored) == 100 + 66 + 39 + 30 + 40 + 29 + 37
    assert sum(s.status_right for s in scored) >= 0.98 * len(scored)
    assert sum(s.reason_right for s in scored) >= 0.90 * len(scored)
    assert not any(s.false_step_down for s in scoring.score(rows) if not s.ambiguous)


# --- failure_logs/heldout.jsonl: 81 excerpts from 80 repositories the shared data does not hold, labelled before the
# classifier saw them (failure_logs/README.md has the first look; after it, its misses' families became rows) ---

HELDOUT = _rows("failure_logs/heldout.jsonl")
DISPUTED_HELDOUT = {
    "protomotions-222-physx-700-pinned-segfault-2048-envs": (
        "the lines say error 700 (an illegal address) and a warning; only the thread says it grows with num_envs"
    ),
    "cmgan-25-nccl-invalid-usage": _DUPLICATE_GPU,
    "genesis-2434-hipmemset-invalid-above-3000-envs": (
        "an invalid argument to hipMemset is a bug, whatever num_envs sets it off; the thread alone ties it to envs"
    ),
    "crowddet-86-nccl-topo-real-path-docker": (
        "NCCL WARN lines are printed by healthy runs too; the excerpt ends before the failure itself"
    ),
}


# failure_logs/heldout_b.jsonl: 46 more from 46 further repositories, gathered after heldout.jsonl's misses were
# fixed and labelled before the classifier saw them (README there: 36/39 unambiguous right at its first look)
HELDOUT_B = _rows("failure_logs/heldout_b.jsonl")
_RAY_WORKER_DIED = (
    "Ray's own message lists three causes (the OOM killer, ray stop, a crash); none is shown, so no step-down"
)
DISPUTED_HELDOUT |= {
    "mimickit-16-found-lost-aggregate-pairs-nan": (
        "a capacity overflow is stepped down (with low confidence, so the rung runs again first); that NaN states "
        "asked for it shows only in the thread"
    ),
    "simplerl-reason-25-ray-actor-died-eof": _RAY_WORKER_DIED,
    "rlinf-622-ray-worker-died-suspected-segv": _RAY_WORKER_DIED,
}


# failure_logs/heldout_c.jsonl: 33 more from 33 further repositories, gathered after heldout_b.jsonl's misses were
# fixed and labelled before the classifier saw them (README there: 29/30 unambiguous right at its first look)
HELDOUT_C = _rows("failure_logs/heldout_c.jsonl")
DISPUTED_HELDOUT |= {
    "open-duck-playground-15-cusolver-internal-error": (
        "cuSolver's internal error names no memory; XLA's preallocation behind it shows only in other threads"
    ),
}


# failure_logs/heldout_d.jsonl: 52 more from 49 further repositories, weighted to RL and GPU-simulation stacks,
# gathered after heldout_c.jsonl's misses were fixed and labelled before the classifier saw them
HELDOUT_D = _rows("failure_logs/heldout_d.jsonl")
_MUJOCO_ALLOC = (
    "MuJoCo says 'Could not allocate memory' when malloc fails and when the model's memory size setting is too small; "
    "no reply in the thread names which"
)
_PHYSX_700 = (
    "the lines say error 700 (an illegal address) and a pinned-memory warning; only the thread ties it to num_envs"
)
DISPUTED_HELDOUT |= {
    "rsl-rl-96-nan-losses-then-found-lost-pairs": (
        "a capacity overflow is stepped down (with low confidence, so the rung runs again first); the NaN losses "
        "before it are training output, not a failure line"
    ),
    "mppi-isaac-64-anymal-found-lost-pairs-then-illegal-access": (
        "the excerpt ends in the middle of PhysX's message ('The appli'), before any capacity or memory word"
    ),
    "asap-35-isaacgym-hoi-4000-envs-physx-700": _PHYSX_700,
    "depRL-11-mujoco-could-not-allocate-memory": _MUJOCO_ALLOC,
    "cpo-pytorch-5-mujoco-loadxml-could-not-allocate": _MUJOCO_ALLOC,
    "ksim-gym-44-xla-cusolver-internal": (
        "cuSolver's internal error names no memory; XLA's preallocation behind it shows only in other threads"
    ),
}


# failure_logs/heldout_e.jsonl: 34 more from 34 further repositories, gathered for the families that still missed on
# RL, GPU-simulation and multi-GPU logs, and labelled before the classifier saw them (README there: 21/29 unambiguous
# right in status at its first look)
HELDOUT_E = _rows("failure_logs/heldout_e.jsonl")


# failure_logs/heldout_f.jsonl: 40 more from 40 further repositories, gathered for what a line says happened (a node
# or a scheduler evicting for memory, a request no card holds, a library that cannot be loaded, a watchdog seen by its
# frames alone) on stacks not used before (Kubernetes, SLURM, Ray, JAX/XLA, mjlab, DeepSpeed, Lightning), labelled
# before the classifier saw them (README there: 26/37 unambiguous right at its first look, 5 false step-downs)
HELDOUT_F = _rows("failure_logs/heldout_f.jsonl")
DISPUTED_HELDOUT |= {
    "lisa-33-deepspeed-sigkill-while-loading-shards": (
        "DeepSpeed's launcher killing its ranks names no signal and no memory; only the moment (loading shards) hints"
    ),
    "octo-22-xla-failed-to-allocate-new-constant": (
        "XLA's 'Failed to allocate N bytes for new constant' names no device and no memory; the thread names no cause"
    ),
    "comfy-controlnet-preprocessors-50-219gib-on-8gb-card": (
        "219 GiB is a size bug on the poster's 8 GB card, but the line states no capacity and some cards hold 219 GiB"
    ),
}
HELDOUT_ALL = HELDOUT + HELDOUT_B + HELDOUT_C + HELDOUT_D + HELDOUT_E + HELDOUT_F


@pytest.mark.parametrize("s", [_param(s, DISPUTED_HELDOUT) for s in HELDOUT_ALL])
def test_heldout_sample(s: dict) -> None:
    _agrees_with_its_label(s)


def test_heldout_rows_are_labelled_sources_from_other_repositories() -> None:
    shared = {
        json.loads(line)["source"].split("#")[0].lower()
        for name in ("failure_logs.jsonl", "failure_logs_more_dev.jsonl", "failure_logs_more_heldout.jsonl")
        for line in (DATA / name).read_text().splitlines()
        if line.strip()
    }
    assert len(HELDOUT) == 81 and sum(not s["ambiguous"] for s in HELDOUT) == 66
    assert len(HELDOUT_B) == 46 and sum(not s["ambiguous"] for s in HELDOUT_B) == 39
    assert len(HELDOUT_C) == 33 and sum(not s["ambiguous"] for s in HELDOUT_C) == 30
    assert len(HELDOUT_D) == 52 and sum(not s["ambiguous"] for s in HELDOUT_D) == 40
    assert len(HELDOUT_E) == 34 and sum(not s["ambiguous"] for s in HELDOUT_E) == 29
    assert len(HELDOUT_F) == 40 and sum(not s["ambiguous"] for s in HELDOUT_F) == 37
    every = HELDOUT_ALL
    assert set(DISPUTED_HELDOUT) <= {s["id"] for s in every if s["ambiguous"]}
    for s in every:
        assert s["source"].startswith("github.com/") and "#" in s["source"], s["id"]
        assert s["source"].split("#")[0].lower() not in shared, s["id"]
    parts = (HELDOUT, HELDOUT_B, HELDOUT_C, HELDOUT_D, HELDOUT_E, HELDOUT_F)
    repos = [{s["source"].split("#")[0].lower() for s in part} for part in parts]
    assert not any(repos[i] & repos[j] for i in range(len(parts)) for j in range(i + 1, len(parts)))


@pytest.mark.parametrize(
    "line",
    [
        "the **Killed** count went up",
        "Killed processes: 3",
        "**Killed",
        "Killed: 90 of 100",
        "ld: Killed signal",
        "Killed process list [done]",
        " 5/25 [00:05<00:20,  1.02s/it]Killed 3 envs",
    ],
)
def test_killed_in_other_text_is_no_kill(line: str) -> None:
    assert classify_text(line, 1).reason is Reason.ERROR


# --- what a line says happened: a library that is not there, a watchdog shown by its frames ---

# NCCL's probe for an optional network plugin, printed by healthy runs too (github.com/NVIDIA/nccl#1231)
NCCL_PLUGIN_PROBE = (
    "VM-0-14-tencentos:162637:162637 [6] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object "
    "file: No such file or directory No plugin found (libnccl-net.so), using internal implementation"
)
# TensorFlow's loader warning; it goes on without the GPU (github.com/tensorflow/tensorflow#56413)
TF_DSO_WARNING = (
    "2022-06-09 15:50:37.711160: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load "
    "dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file or "
    "directory"
)

# torchvision's warning that its optional image extension did not load (github.com/NixOS/nixpkgs#162286)
TORCHVISION_WARNING = (
    "/home/octopus/workdir/lib/python3.10/site-packages/torchvision/io/image.py:13: UserWarning: Failed to load image "
    "Python extension: /home/octopus/workdir/lib/python3.10/site-packages/torchvision/image.so: undefined symbol: "
    "_ZN3c105ErrorC2ENS_14SourceLocationESs\n"
    '  warn(f"Failed to load image Python extension: {e}")'
)


@pytest.mark.parametrize(
    "probe, failure, reason",
    [
        (NCCL_PLUGIN_PROBE, PUBLIC["segmenter-60-nccl-system-error"][1], Reason.NCCL_ERROR),
        (TF_DSO_WARNING, PUBLIC["rvc-1882-gloo-reset-by-peer"][1], Reason.PEER_LOST),
        (TORCHVISION_WARNING, TIMEOUT_LINE, Reason.NCCL_TIMEOUT),
    ],
    ids=["nccl-net-plugin", "tf-dso-loader", "torchvision-image-extension"],
)
def test_a_probe_for_an_optional_library_is_no_install_error(probe: str, failure: str, reason: Reason) -> None:
    assert classify_text(f"{probe}\n{failure}", 1).reason is reason


def test_a_library_that_cannot_be_loaded_stops_the_profile_even_where_nccl_names_it() -> None:
    """XLA's 'NCCL operation ... failed: Unable to load NCCL library' is a missing install at every rung, not a
    collective that failed at this one; after a clean exit the same line is nothing."""
    line = PUBLIC["lwm-44-xla-unable-to-load-nccl-library"][1]
    verdict = classify_text(line, 1)
    assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
    assert "Unable to load NCCL library" in verdict.evidence
    assert classify_text(line, 0).status is Status.OK


def test_a_watchdog_seen_by_its_frames_alone_is_a_collective_failure() -> None:
    """Its timeout check in the frames names a timeout; the watchdog thread alone a collective failure, with low
    confidence (a CUDA error surfaces in the same thread)."""
    timeout = classify_text(PUBLIC["sglang-1693-watchdog-frames-check-timeout"][1], -6)
    assert (timeout.status, timeout.reason, timeout.confidence) == (
        Status.OOM_OR_NCCL,
        Reason.NCCL_TIMEOUT,
        Confidence.HIGH,
    )
    alone = classify_text(PUBLIC["pytorch-126544-watchdog-frame-only"][1], -6)
    assert (alone.status, alone.reason, alone.confidence) == (Status.OOM_OR_NCCL, Reason.NCCL_ERROR, Confidence.LOW)
