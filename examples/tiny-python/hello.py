"""A first script for the tiny-python sandbox: bluebox run <name> -- python3 hello.py"""
import os
import platform

print(f"hello from Python {platform.python_version()} on kernel {platform.release()}")
print(f"working directory: {os.getcwd()} (only /data survives the run)")
