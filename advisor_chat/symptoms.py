"""The symptom-tag vocabulary shared by analyzers and knowledge cases.

Analyzers emit tags in ``Finding.symptom_tags``; cases list them in the ``symptom_tags`` of
``knowledge/cases/*.md`` front matter.

A test checks that every tag used by a case or emitted by an analyzer is listed here. Add a tag
here first, with an English and a Chinese description, then use it.
"""

from __future__ import annotations

SYMPTOM_TAGS: dict[str, tuple[str, str]] = {
    # scheduling / host side
    "host_bound": ("device waits for the host to dispatch work", "下发瓶颈，设备等待 主机下发"),
    "high_free": ("large Free (device idle) share of the step", "Free（空闲）时间占比高"),
    "free_spread": ("Free differs a lot between ranks", "各卡 Free 时间差异大"),
    "launch_delay": (
        "long delay from host API call to device start",
        "主机下发到 device 执行的时延长",
    ),
    "tiny_kernels": ("many very short kernels dominate the timeline", "大量极短算子"),
    "synchronize_stream": (
        "host synchronizes the stream often (aclrtSynchronizeStream, .item())",
        "频繁流同步",
    ),
    "launch_blocking": (
        "ASCEND_LAUNCH_BLOCKING=1 serializes dispatch",
        "ASCEND_LAUNCH_BLOCKING=1 导致串行下发",
    ),
    "device_held": (
        "the device idles although its host queued the work ahead (something else holds the NPU)",
        "主机已提前下发任务，设备却仍空闲（NPU 被其他进程占用）",
    ),
    "gc_pause": (
        "long host gaps without API activity (Python GC)",
        "Python GC 导致主机长时间停顿",
    ),
    "dataloader_stall": (
        "device idle at step start waiting for data",
        "数据加载导致每步开始处空闲",
    ),
    "skipped_update": (
        "steps that apply no optimizer update (fp16 overflow, a skip condition)",
        "跳过优化器更新的步（fp16 溢出或跳过条件）",
    ),
    "slow_steps": (
        "some steps carry more device work on every rank (an evaluation pass, larger inputs)",
        "部分步在每张卡上都有更多设备计算（评估前向、更大的输入）",
    ),
    "per_tensor_sync": (
        "one tiny collective and host wait per tensor (a per-parameter loop)",
        "逐个张量的微小集合通信与主机等待（逐参数循环）",
    ),
    "python_work": (
        "the training thread runs Python work that issues nothing to the device",
        "训练线程执行不向设备下发任务的 Python 计算",
    ),
    "cpu_binding": ("host threads not bound to cores; jitter", "未绑核导致 host 抖动"),
    # compute
    "compute_spread": ("Computing differs a lot between ranks", "各卡计算时间差异大"),
    "compute_straggler": ("one rank computes longer than its peers", "某卡计算明显慢于其他卡"),
    "op_regression_shape": (
        "an operator is slower at one input shape",
        "某算子在特定 shape 下变慢",
    ),
    "matmul_slow": ("MatMul / BatchMatMul kernels slower than peers", "MatMul 类算子耗时异常"),
    "shape_alignment": (
        "tensor axes not aligned to hardware-friendly sizes",
        "shape 未对齐导致算子低效",
    ),
    "op_count_imbalance": (
        "ranks run different numbers of operators (load imbalance)",
        "各卡算子数量不一致（负载不均）",
    ),
    "aicpu_op": ("AI CPU operators on the hot path", "热点路径上存在 AI CPU 算子"),
    "aicpu_busy": (
        "one device's AI CPU kernels far slower than its peers' (its AI CPU busy)",
        "某张卡的 AI CPU 算子比其他卡慢得多（其 AI CPU 被占用）",
    ),
    "op_hotspot": (
        "one operator type (not the model's main matrix work) dominates every rank's step",
        "某类算子（非主要矩阵计算）在每张卡上都占据大量时间",
    ),
    "recompute": (
        "forward operators run more often than their gradients (activation recomputation)",
        "前向算子的执行次数多于其反向算子（激活重计算）",
    ),
    "aicore_clock_low": (
        "the AI Core of every rank runs below its rated clock (power cap or thermal throttling)",
        "所有卡的 AI Core 都低于额定频率运行（功耗上限或过热降频）",
    ),
    "device_slow": (
        "every operator of one device is slower by the same factor (throttled or degraded)",
        "某设备上所有算子按同一倍数变慢（降频或性能劣化）",
    ),
    "dtype_mismatch": ("ranks compute in different precisions", "各卡计算精度不一致"),
    "load_imbalance": (
        "ranks get different amounts of work (shapes, token counts)",
        "各卡计算量不均（shape、token 数不同）",
    ),
    "dynamic_shape": (
        "dynamic shapes cause recompilation / slow kernels",
        "动态 shape 导致重复编译或低效算子",
    ),
    "moe_imbalance": ("MoE experts receive unbalanced tokens", "MoE 专家负载不均"),
    # communication
    "comm_not_overlapped": ("communication not hidden behind computation", "通信未被计算掩盖"),
    "comm_bound": ("non-overlapped communication dominates the step", "未掩盖的通信占比大"),
    "comm_wait_high": (
        "ranks spend a large share of collectives waiting (wait ratio > 0.2)",
        "通信等待占比高",
    ),
    "slow_rank": (
        "one rank arrives late at collectives; others wait for it",
        "慢卡，其他卡在集合通信中等待它",
    ),
    "slow_link": ("one link's bandwidth is far below its peers", "慢链路，带宽明显低于同类链路"),
    "intra_node_off_hccs": (
        "traffic inside a server goes over RoCE or PCIe instead of HCCS",
        "服务器内通信没有走 HCCS（走了 RoCE 或 PCIe）",
    ),
    "group_across_nodes": (
        "a parallel group laid across nodes: its collectives cross RDMA",
        "并行通信组跨机放置：其集合通信要走 RDMA",
    ),
    "hccl_buffsize_small": (
        "HCCL_BUFFSIZE below its default: large collectives run in several rounds",
        "HCCL_BUFFSIZE 低于默认值：大的集合通信要分多轮完成",
    ),
    "comm_setting": (
        "an environment setting slows every collective of the job",
        "某个环境变量设置拖慢了作业的所有集合通信",
    ),
    "hccl_deterministic": (
        "deterministic HCCL reduction (HCCL_DETERMINISTIC) slows the reducing collectives",
        "开启了 HCCL 确定性计算（HCCL_DETERMINISTIC），归约类集合通信变慢",
    ),
    "unfused_ops": (
        "fused kernels its peers run execute as chains of small operators on the slow ranks",
        "其他卡运行的融合算子在慢卡上被拆成一串小算子",
    ),
    "device_copies": (
        "the device runs host-device copy tasks in line with its kernels (counted as Free)",
        "设备在算子之间串行执行主机与设备间的拷贝任务（被算作空闲）",
    ),
    "pageable_copy": (
        "the host blocks in copies from pageable (unpinned) memory while the device idles",
        "主机阻塞在可分页（未锁页）内存的拷贝中，设备空闲",
    ),
    "env_differs": (
        "the slow ranks run with environment settings their peers do not have",
        "慢的卡的环境变量设置与其他卡不同",
    ),
    "small_packets": ("many small transfers keep bandwidth low", "小包过多导致带宽低"),
    "rdma_low_bandwidth": ("RDMA (inter-node) bandwidth low", "RDMA（跨机）带宽低"),
    "hccs_low_bandwidth": ("HCCS (intra-node) bandwidth low", "HCCS（机内）带宽低"),
    "mc2_opportunity": (
        "MatMul next to a TP collective that mc2 fusion could overlap",
        "可用 mc2 融合的 MatMul+通信",
    ),
    "hccl_timeout_risk": (
        "HCCL timeouts too short for observed waits / job scale",
        "HCCL 超时设置存在风险",
    ),
    "first_collective_late": (
        "a rank reaches the first collective very late",
        "某卡很晚才到达第一个集合通信",
    ),
    "hccl_op_count_increase": (
        "many more HCCL operators than before (e.g. after a CANN upgrade)",
        "HCCL 算子数量增多（如 CANN 升级后）",
    ),
    "pipeline_bubble": ("pipeline-parallel bubbles (receive waits) are large", "流水线并行气泡大"),
    "non_power_of_two_parallel": ("a parallel size is not a power of two", "并行维度不是 2 的幂"),
    # trends, diffs
    "step_degradation": ("step time grows over the run", "每步耗时随训练逐步增长"),
    "step_jitter": ("step time varies a lot between steps", "每步耗时抖动大"),
    "profile_regression": ("the new profile is slower than the baseline", "新的性能数据比基线慢"),
    "cann_upgrade": (
        "behaviour changed after a CANN / torch_npu upgrade",
        "CANN / torch_npu 升级后行为变化",
    ),
    # environment, memory, data quality
    "memory_growth": (
        "allocated device memory grows every step (tensors kept across steps)",
        "已分配的设备内存每步增长（张量被跨步保留）",
    ),
    "memory_fragmentation": (
        "allocator without expandable segments; fragmentation / reorganisation",
        "内存碎片（未开启 expandable_segments）",
    ),
    "version_mismatch": (
        "ranks run different CANN / torch_npu versions",
        "各卡 CANN / torch_npu 版本不一致",
    ),
    "profiler_overhead": (
        "profiler level / options inflate the measured times",
        "采集级别过高带来性能开销",
    ),
    "missing_comm_data": (
        "no communication data (e.g. profiler Level0)",
        "缺少通信数据（如 Level0 采集）",
    ),
    "missing_ranks": ("some ranks' data is missing", "部分卡的数据缺失"),
    "missing_steps": ("steps differ between ranks or are missing", "部分步缺失或不一致"),
    "log_level_verbose": ("verbose device logging slows the job", "日志级别过高影响性能"),
}

#: Tags that say why (a mechanism the evidence found), not only what is seen (``slow_rank``,
#: ``high_free``, ``step_degradation``): a knowledge case fits a cause that carries one of these
#: only if the case carries one too (a checkpoint case does not fit a fragmented allocator's
#: stall, a host-dispatch case not a card whose copies crawl over its PCIe link).
WHY_TAGS: frozenset[str] = frozenset(
    {
        "tiny_kernels",
        "synchronize_stream",
        "launch_blocking",
        "device_held",
        "gc_pause",
        "dataloader_stall",
        "python_work",
        "per_tensor_sync",
        "skipped_update",
        "slow_steps",
        "cpu_binding",
        "shape_alignment",
        "aicpu_op",
        "recompute",
        "aicore_clock_low",
        "device_slow",
        "dtype_mismatch",
        "dynamic_shape",
        "moe_imbalance",
        "intra_node_off_hccs",
        "group_across_nodes",
        "hccl_buffsize_small",
        "hccl_deterministic",
        "unfused_ops",
        "device_copies",
        "pageable_copy",
        "env_differs",
        "memory_fragmentation",
        "version_mismatch",
        "profiler_overhead",
        "log_level_verbose",
    }
)


def unknown_tags(tags: list[str] | tuple[str, ...]) -> list[str]:
    """Return the tags in ``tags`` that are not in :data:`SYMPTOM_TAGS`."""
    return [t for t in tags if t not in SYMPTOM_TAGS]
