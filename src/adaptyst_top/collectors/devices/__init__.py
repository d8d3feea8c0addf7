"""Device telemetry: CPU, NVIDIA, AMD, FPGA and OpenCL devices, their power and energy."""
