# The slowest tests, by measurement, with their seconds as COST: ctest starts the tests of highest COST
# first. In a fresh build directory (CI's clean clone) it has no timings of its own yet
# (Testing/Temporary/CTestCostData.txt; once it has, they take over), so it would start the tests in file
# order, where these come late: the CUDA model tests, gpt_cuda_emu_tests' last, ran beside almost nothing
# at the end. Measured in a plain Release run (ctest -j 2, 2 cores at load average 7-12, so several times
# the idle seconds; only their order matters here). Listed: every test over 8 s in that run.
# cuda_emu.OpTable, added by add_test rather than discovered, takes its COST in tests/CMakeLists.txt.
set_tests_properties(MixedPrecision.EveryRecipeLearnsTextLikeFp32 PROPERTIES COST 199)
set_tests_properties(CudaModel.EveryRecomputeModeIsBitwiseEqualToNone PROPERTIES COST 192)
set_tests_properties(CudaTrainer.TenStepsLogTheCpuLosses PROPERTIES COST 71)
# Added 2026-12-03: about 24 s on an idle Zen 4 core pair (three T = 1024 cases), some 17 times the BF16
# kernel test's 1.4 s there, whose loaded COST was 9.
set_tests_properties(FlashAttention.TensorCoreKernelsAtT1024WithinTwiceANaiveAttentionsError PROPERTIES COST 150)
# Added 2026-12-07: 20 s in a ctest -j 2 run on a Zen 5 core pair (six short trainings on an emulated T4),
# about as long as the fused attention's T = 1024 test above.
set_tests_properties(TuringTraining.Fp32Fp16AndBf16MatchTheCpu PROPERTIES COST 140)
set_tests_properties(CudaFlashModel.EveryRecomputeModeIsBitwiseEqualToNone PROPERTIES COST 45)
set_tests_properties(CudaFlashTrainer.FusedAttentionTrainsAsTheMaterialisedOne PROPERTIES COST 42)
set_tests_properties(CudaModel.EveryRecipeMatchesTheCpu PROPERTIES COST 40)
set_tests_properties(CudaModel.TheSameRunTwiceIsBitwiseEqual PROPERTIES COST 31)
set_tests_properties(Recompute.EveryModeUnderEachRecipeGivesBitwiseIdenticalGradients PROPERTIES COST 27)
set_tests_properties(CudaTrainer.ResumeEqualsTheUninterruptedRun PROPERTIES COST 18)
set_tests_properties(CrashResume.TwentyRandomKillsNeverCostMoreThanTheLastCheckpoint PROPERTIES COST 11)
set_tests_properties(CudaOffload.OffloadedRunWithAccumulationEqualsTheDeviceRunBitwise PROPERTIES COST 11)
set_tests_properties(CudaOffloadPipeline.APipelinedRunIsPinnedAndReproducesItselfBitwise PROPERTIES COST 10)
set_tests_properties(TrainerEndToEnd.RepeatingSequenceLossGoesToZero PROPERTIES COST 9)
set_tests_properties(FlashAttention.TensorCoreKernelsWithinTwiceANaiveBf16AttentionsError PROPERTIES COST 9)
set_tests_properties(CudaTrainer.Tf32IsUsedOnlyWhenTheConfigAsks PROPERTIES COST 8)
set_tests_properties(MixedPrecision.EveryRecipeConvergesLikeFp32 PROPERTIES COST 8)
set_tests_properties(CudaLora.ThreeStepsMatchTheCpu PROPERTIES COST 8)
set_tests_properties(StartChecks.ARunLargerThanTheMachineIsRefusedByComponentBeforeAllocating PROPERTIES COST 8)
