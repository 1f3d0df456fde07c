# Sourced (not run) by every device-side entry point, from the repository
# root: the staged build's programs unpacked (scripts/unpack_device_build.sh)
# and the library path they load with: the Debian libraries staged beside
# them (scripts/stage_device_build.sh), then cuBLAS/cuBLASLt from PyTorch's
# nvidia-cublas wheel where it is installed, else the CUDA toolkit's.
CUBLAS_DIR=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$PWD/.devbuild/lib:${CUBLAS_DIR}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
scripts/unpack_device_build.sh  # programs staged compressed (STAGE_XZ=1)
