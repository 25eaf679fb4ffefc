/* The guest init's boot profile marks. */
#pragma once

/* Boot profiling (bench/boot_profile.py): with BLUEBOX_BOOT_PROFILE=1 among the kernel's
 * command-line words (BLUEBOX_UML_ARGS; the kernel hands unknown ones to init's environment),
 * each call logs "bluebox-init: STEP at MS ms" (CLOCK_BOOTTIME, what /proc/uptime counts) to
 * the kernel log, which dmesg shows. Does nothing otherwise. */
void guest_boot_mark(const char *step);
