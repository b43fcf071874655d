# A CPU image with gpt-train built and its tests run. (The CUDA backend builds when nvcc is present;
# start from an nvidia/cuda devel image to get it.)
FROM debian:12
WORKDIR /gpt-train
COPY . .
RUN scripts/install_deps.sh && scripts/build.sh -DGPT_CUDA=AUTO && cd build && ctest --output-on-failure
ENTRYPOINT ["/gpt-train/build/gpt-train"]
