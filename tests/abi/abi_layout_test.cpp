// SPDX-License-Identifier: Apache-2.0
//
// Pins the plugin ABI: the offset of every field and the size of every table, as shipped
// in ABI 1.0 (x86_64/aarch64 LP64). A failure here means a change moved a field: the ABI
// is append-only, so add new fields at the END of a struct and bump LOUPE_ABI_MINOR;
// then extend (never edit) this snapshot.
#include <gtest/gtest.h>

#include <cstddef>

#include "loupe/abi/loupe.h"

TEST(AbiLayout, VersionIsOneEleven) {
  EXPECT_EQ(LOUPE_ABI_MAJOR, 1);
  EXPECT_EQ(LOUPE_ABI_MINOR, 12);
  EXPECT_STREQ(LOUPE_PLUGIN_ENTRY_SYMBOL, "loupe_plugin_entry");
}

TEST(AbiLayout, EveryFieldOffsetIsPinned) {
  // loupe_label
  EXPECT_EQ(offsetof(loupe_label, key), 0u);
  EXPECT_EQ(offsetof(loupe_label, value), 8u);
  EXPECT_EQ(sizeof(loupe_label), 16u);
  // loupe_bucket
  EXPECT_EQ(offsetof(loupe_bucket, lower), 0u);
  EXPECT_EQ(offsetof(loupe_bucket, upper), 8u);
  EXPECT_EQ(offsetof(loupe_bucket, count), 16u);
  EXPECT_EQ(sizeof(loupe_bucket), 24u);
  // loupe_percentile
  EXPECT_EQ(offsetof(loupe_percentile, quantile), 0u);
  EXPECT_EQ(offsetof(loupe_percentile, value), 8u);
  EXPECT_EQ(offsetof(loupe_percentile, lower), 16u);
  EXPECT_EQ(offsetof(loupe_percentile, upper), 24u);
  EXPECT_EQ(sizeof(loupe_percentile), 32u);
  // loupe_histogram
  EXPECT_EQ(offsetof(loupe_histogram, size), 0u);
  EXPECT_EQ(offsetof(loupe_histogram, scheme), 4u);
  EXPECT_EQ(offsetof(loupe_histogram, sub_buckets), 8u);
  EXPECT_EQ(offsetof(loupe_histogram, n_buckets), 12u);
  EXPECT_EQ(offsetof(loupe_histogram, unit), 16u);
  EXPECT_EQ(offsetof(loupe_histogram, buckets), 24u);
  EXPECT_EQ(offsetof(loupe_histogram, count), 32u);
  EXPECT_EQ(offsetof(loupe_histogram, sum), 40u);
  EXPECT_EQ(offsetof(loupe_histogram, min), 48u);
  EXPECT_EQ(offsetof(loupe_histogram, max), 56u);
  EXPECT_EQ(offsetof(loupe_histogram, percentiles), 64u);
  EXPECT_EQ(offsetof(loupe_histogram, n_percentiles), 72u);
  EXPECT_EQ(sizeof(loupe_histogram), 80u);
  // loupe_frame
  EXPECT_EQ(offsetof(loupe_frame, address), 0u);
  EXPECT_EQ(offsetof(loupe_frame, symbol), 8u);
  EXPECT_EQ(offsetof(loupe_frame, module), 16u);
  EXPECT_EQ(offsetof(loupe_frame, offset), 24u);
  EXPECT_EQ(offsetof(loupe_frame, kind), 32u);
  EXPECT_EQ(offsetof(loupe_frame, resolution), 36u);
  EXPECT_EQ(sizeof(loupe_frame), 40u);
  // loupe_value
  EXPECT_EQ(offsetof(loupe_value, name), 0u);
  EXPECT_EQ(offsetof(loupe_value, unit), 8u);
  EXPECT_EQ(offsetof(loupe_value, value), 16u);
  EXPECT_EQ(sizeof(loupe_value), 24u);
  // loupe_stack_sample
  EXPECT_EQ(offsetof(loupe_stack_sample, size), 0u);
  EXPECT_EQ(offsetof(loupe_stack_sample, n_frames), 4u);
  EXPECT_EQ(offsetof(loupe_stack_sample, frames), 8u);
  EXPECT_EQ(offsetof(loupe_stack_sample, values), 16u);
  EXPECT_EQ(offsetof(loupe_stack_sample, n_values), 24u);
  EXPECT_EQ(sizeof(loupe_stack_sample), 32u);
  // loupe_field
  EXPECT_EQ(offsetof(loupe_field, key), 0u);
  EXPECT_EQ(offsetof(loupe_field, type), 8u);
  EXPECT_EQ(offsetof(loupe_field, reserved), 12u);
  EXPECT_EQ(offsetof(loupe_field, v), 16u);
  EXPECT_EQ(sizeof(loupe_field), 24u);
  // loupe_event
  EXPECT_EQ(offsetof(loupe_event, size), 0u);
  EXPECT_EQ(offsetof(loupe_event, n_fields), 4u);
  EXPECT_EQ(offsetof(loupe_event, timestamp_ns), 8u);
  EXPECT_EQ(offsetof(loupe_event, fields), 16u);
  EXPECT_EQ(offsetof(loupe_event, frames), 24u);
  EXPECT_EQ(offsetof(loupe_event, n_frames), 32u);
  EXPECT_EQ(sizeof(loupe_event), 40u);
  // loupe_metric
  EXPECT_EQ(offsetof(loupe_metric, size), 0u);
  EXPECT_EQ(offsetof(loupe_metric, type), 4u);
  EXPECT_EQ(offsetof(loupe_metric, unit), 8u);
  EXPECT_EQ(offsetof(loupe_metric, value), 16u);
  EXPECT_EQ(sizeof(loupe_metric), 24u);
  // loupe_health
  EXPECT_EQ(offsetof(loupe_health, size), 0u);
  EXPECT_EQ(offsetof(loupe_health, severity), 4u);
  EXPECT_EQ(offsetof(loupe_health, component), 8u);
  EXPECT_EQ(offsetof(loupe_health, value), 16u);
  EXPECT_EQ(offsetof(loupe_health, message), 24u);
  EXPECT_EQ(offsetof(loupe_health, whole), 32u);       // 1.11
  EXPECT_EQ(offsetof(loupe_health, whole_unit), 40u);  // 1.11
  EXPECT_EQ(offsetof(loupe_health, effect), 48u);      // 1.11
  EXPECT_EQ(sizeof(loupe_health), 56u);
  // loupe_record
  EXPECT_EQ(offsetof(loupe_record, size), 0u);
  EXPECT_EQ(offsetof(loupe_record, kind), 4u);
  EXPECT_EQ(offsetof(loupe_record, plugin), 8u);
  EXPECT_EQ(offsetof(loupe_record, name), 16u);
  EXPECT_EQ(offsetof(loupe_record, labels), 24u);
  EXPECT_EQ(offsetof(loupe_record, n_labels), 32u);
  EXPECT_EQ(offsetof(loupe_record, is_final), 36u);
  EXPECT_EQ(offsetof(loupe_record, window_start_ns), 40u);
  EXPECT_EQ(offsetof(loupe_record, window_end_ns), 48u);
  EXPECT_EQ(offsetof(loupe_record, histogram), 56u);
  EXPECT_EQ(offsetof(loupe_record, stack), 64u);
  EXPECT_EQ(offsetof(loupe_record, event), 72u);
  EXPECT_EQ(offsetof(loupe_record, metric), 80u);
  EXPECT_EQ(offsetof(loupe_record, health), 88u);
  EXPECT_EQ(offsetof(loupe_record, finding), 96u);  // ABI 1.4
  EXPECT_EQ(sizeof(loupe_record), 104u);
  // loupe_finding (ABI 1.4)
  EXPECT_EQ(offsetof(loupe_finding, size), 0u);
  EXPECT_EQ(offsetof(loupe_finding, n_evidence), 4u);
  EXPECT_EQ(offsetof(loupe_finding, rule), 8u);
  EXPECT_EQ(offsetof(loupe_finding, statement), 16u);
  EXPECT_EQ(offsetof(loupe_finding, evidence), 24u);
  EXPECT_EQ(offsetof(loupe_finding, weight), 32u);
  EXPECT_EQ(sizeof(loupe_finding), 40u);
  // loupe_config_key
  EXPECT_EQ(offsetof(loupe_config_key, name), 0u);
  EXPECT_EQ(offsetof(loupe_config_key, type), 8u);
  EXPECT_EQ(offsetof(loupe_config_key, flags), 12u);
  EXPECT_EQ(offsetof(loupe_config_key, default_value), 16u);
  EXPECT_EQ(offsetof(loupe_config_key, help), 24u);
  EXPECT_EQ(offsetof(loupe_config_key, min_int), 32u);
  EXPECT_EQ(offsetof(loupe_config_key, max_int), 40u);
  EXPECT_EQ(offsetof(loupe_config_key, fields), 48u);
  EXPECT_EQ(offsetof(loupe_config_key, n_fields), 56u);
  EXPECT_EQ(offsetof(loupe_config_key, reserved), 60u);
  EXPECT_EQ(offsetof(loupe_config_key, choices), 64u);  // ABI 1.1
  EXPECT_EQ(sizeof(loupe_config_key), 72u);
  // loupe_ring_header
  EXPECT_EQ(offsetof(loupe_ring_header, type), 0u);
  EXPECT_EQ(offsetof(loupe_ring_header, version), 2u);
  EXPECT_EQ(offsetof(loupe_ring_header, len), 4u);
  EXPECT_EQ(sizeof(loupe_ring_header), 8u);
  // loupe_ring_spec
  EXPECT_EQ(offsetof(loupe_ring_spec, size), 0u);
  EXPECT_EQ(offsetof(loupe_ring_spec, map_fd), 4u);
  EXPECT_EQ(offsetof(loupe_ring_spec, name), 8u);
  EXPECT_EQ(offsetof(loupe_ring_spec, record_type), 16u);
  EXPECT_EQ(offsetof(loupe_ring_spec, record_version), 18u);
  EXPECT_EQ(offsetof(loupe_ring_spec, min_len), 20u);
  EXPECT_EQ(offsetof(loupe_ring_spec, max_len), 24u);
  EXPECT_EQ(offsetof(loupe_ring_spec, category), 28u);
  EXPECT_EQ(offsetof(loupe_ring_spec, policy), 32u);
  EXPECT_EQ(offsetof(loupe_ring_spec, lost_map_fd), 36u);
  EXPECT_EQ(offsetof(loupe_ring_spec, divisor_map_fd), 40u);
  EXPECT_EQ(offsetof(loupe_ring_spec, decode), 48u);
  EXPECT_EQ(offsetof(loupe_ring_spec, coalesce_key), 56u);
  EXPECT_EQ(offsetof(loupe_ring_spec, user), 64u);
  EXPECT_EQ(sizeof(loupe_ring_spec), 72u);
  // loupe_host_services
  EXPECT_EQ(offsetof(loupe_host_services, size), 0u);
  EXPECT_EQ(offsetof(loupe_host_services, abi_major), 4u);
  EXPECT_EQ(offsetof(loupe_host_services, abi_minor), 6u);
  EXPECT_EQ(offsetof(loupe_host_services, host), 8u);
  EXPECT_EQ(offsetof(loupe_host_services, log), 16u);
  EXPECT_EQ(offsetof(loupe_host_services, config_bool), 24u);
  EXPECT_EQ(offsetof(loupe_host_services, config_int), 32u);
  EXPECT_EQ(offsetof(loupe_host_services, config_float), 40u);
  EXPECT_EQ(offsetof(loupe_host_services, config_string), 48u);
  EXPECT_EQ(offsetof(loupe_host_services, config_list_len), 56u);
  EXPECT_EQ(offsetof(loupe_host_services, config_list_string), 64u);
  EXPECT_EQ(offsetof(loupe_host_services, config_list_int), 72u);
  EXPECT_EQ(offsetof(loupe_host_services, config_list_table), 80u);
  EXPECT_EQ(offsetof(loupe_host_services, feature_available), 88u);
  EXPECT_EQ(offsetof(loupe_host_services, tracepoint_exists), 96u);
  EXPECT_EQ(offsetof(loupe_host_services, ksym_exists), 104u);
  EXPECT_EQ(offsetof(loupe_host_services, bpf_load), 112u);
  EXPECT_EQ(offsetof(loupe_host_services, bpf_attach), 120u);
  EXPECT_EQ(offsetof(loupe_host_services, bpf_adopt_link), 128u);
  EXPECT_EQ(offsetof(loupe_host_services, ring_register), 136u);
  EXPECT_EQ(offsetof(loupe_host_services, emit), 144u);
  EXPECT_EQ(offsetof(loupe_host_services, symbolize), 152u);
  EXPECT_EQ(offsetof(loupe_host_services, now_ns), 160u);
  EXPECT_EQ(offsetof(loupe_host_services, boot_to_wall_ns), 168u);
  EXPECT_EQ(offsetof(loupe_host_services, last_error), 176u);
  EXPECT_EQ(offsetof(loupe_host_services, symbolize_data), 184u);
  EXPECT_EQ(offsetof(loupe_host_services, symbols_invalidate), 192u);
  EXPECT_EQ(offsetof(loupe_host_services, bpf_adopt_link_at), 200u);     // 1.2
  EXPECT_EQ(offsetof(loupe_host_services, unwind_user), 208u);           // 1.2
  EXPECT_EQ(offsetof(loupe_host_services, unwind_tables_attach), 216u);  // 1.5
  EXPECT_EQ(offsetof(loupe_host_services, unwind_files_attach), 224u);   // 1.6
  EXPECT_EQ(offsetof(loupe_host_services, unwind_python_attach), 232u);  // 1.7
  EXPECT_EQ(offsetof(loupe_host_services, symbolize_stack), 240u);       // 1.10
  EXPECT_EQ(offsetof(loupe_host_services, unwinder_maps), 248u);         // 1.10
  EXPECT_EQ(sizeof(loupe_host_services), 256u);
  // loupe_map_ref (ABI 1.10)
  EXPECT_EQ(offsetof(loupe_map_ref, name), 0u);
  EXPECT_EQ(offsetof(loupe_map_ref, fd), 8u);
  EXPECT_EQ(sizeof(loupe_map_ref), 16u);
  // Frame kinds and resolutions are appended, never renumbered.
  EXPECT_EQ(LOUPE_FRAME_JAVA, 5);
  EXPECT_EQ(LOUPE_RESOLVED_RUNTIME, 8);
  // loupe_user_regs (ABI 1.2)
  EXPECT_EQ(offsetof(loupe_user_regs, size), 0u);
  EXPECT_EQ(offsetof(loupe_user_regs, arch), 4u);
  EXPECT_EQ(offsetof(loupe_user_regs, mask), 8u);
  EXPECT_EQ(offsetof(loupe_user_regs, regs), 16u);
  EXPECT_EQ(sizeof(loupe_user_regs), 16u + 8u * LOUPE_USER_REGS_MAX);
  EXPECT_EQ(LOUPE_USER_REGS_MAX, 33);
  EXPECT_EQ(LOUPE_RESOLVED_EH_FRAME, 6);
  EXPECT_EQ(LOUPE_UNWIND_STATUS_COUNT, 8);
  // loupe_session_info
  EXPECT_EQ(offsetof(loupe_session_info, size), 0u);
  EXPECT_EQ(offsetof(loupe_session_info, target_pid), 4u);
  EXPECT_EQ(offsetof(loupe_session_info, target_command), 8u);
  EXPECT_EQ(offsetof(loupe_session_info, duration_s), 16u);
  EXPECT_EQ(offsetof(loupe_session_info, interval_s), 24u);
  EXPECT_EQ(offsetof(loupe_session_info, output_dir), 32u);
  EXPECT_EQ(offsetof(loupe_session_info, instance_name), 40u);
  EXPECT_EQ(offsetof(loupe_session_info, start_wall_ns), 48u);
  EXPECT_EQ(offsetof(loupe_session_info, flags), 56u);
  EXPECT_EQ(offsetof(loupe_session_info, reserved), 60u);
  EXPECT_EQ(offsetof(loupe_session_info, tree_map_fd), 64u);
  EXPECT_EQ(offsetof(loupe_session_info, reserved2), 68u);
  EXPECT_EQ(offsetof(loupe_session_info, profilers), 72u);
  EXPECT_EQ(offsetof(loupe_session_info, n_profilers), 80u);
  EXPECT_EQ(offsetof(loupe_session_info, reserved3), 84u);
  EXPECT_EQ(offsetof(loupe_session_info, rotate_s), 88u);
  EXPECT_EQ(sizeof(loupe_session_info), 96u);
  // loupe_setup_args
  EXPECT_EQ(offsetof(loupe_setup_args, size), 0u);
  EXPECT_EQ(offsetof(loupe_setup_args, reserved), 4u);
  EXPECT_EQ(offsetof(loupe_setup_args, services), 8u);
  EXPECT_EQ(offsetof(loupe_setup_args, config), 16u);
  EXPECT_EQ(offsetof(loupe_setup_args, session), 24u);
  EXPECT_EQ(sizeof(loupe_setup_args), 32u);
  // loupe_start_args
  EXPECT_EQ(offsetof(loupe_start_args, size), 0u);
  EXPECT_EQ(offsetof(loupe_start_args, reserved), 4u);
  EXPECT_EQ(sizeof(loupe_start_args), 8u);
  // loupe_collect_args
  EXPECT_EQ(offsetof(loupe_collect_args, size), 0u);
  EXPECT_EQ(offsetof(loupe_collect_args, is_final), 4u);
  EXPECT_EQ(offsetof(loupe_collect_args, window_start_ns), 8u);
  EXPECT_EQ(offsetof(loupe_collect_args, window_end_ns), 16u);
  EXPECT_EQ(sizeof(loupe_collect_args), 24u);
  // loupe_stop_args
  EXPECT_EQ(offsetof(loupe_stop_args, size), 0u);
  EXPECT_EQ(offsetof(loupe_stop_args, reserved), 4u);
  EXPECT_EQ(offsetof(loupe_stop_args, drain_deadline_ns), 8u);
  EXPECT_EQ(sizeof(loupe_stop_args), 16u);
  // loupe_flush_args
  EXPECT_EQ(offsetof(loupe_flush_args, size), 0u);
  EXPECT_EQ(offsetof(loupe_flush_args, is_final), 4u);
  EXPECT_EQ(offsetof(loupe_flush_args, window_dir), 8u);
  EXPECT_EQ(offsetof(loupe_flush_args, window_start_ns), 16u);
  EXPECT_EQ(offsetof(loupe_flush_args, window_end_ns), 24u);
  EXPECT_EQ(sizeof(loupe_flush_args), 32u);
  // loupe_plugin_descriptor
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, size), 0u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, abi_major), 4u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, abi_minor), 6u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, kind), 8u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, config_key_size), 12u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, name), 16u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, version), 24u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, description), 32u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, config_keys), 40u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, n_config_keys), 48u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, reserved), 52u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, setup), 56u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, start), 64u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, collect), 72u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, stop), 80u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, consume), 88u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, flush), 96u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, destroy), 104u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, last_error), 112u);
  EXPECT_EQ(offsetof(loupe_plugin_descriptor, set_rate), 120u);
  EXPECT_EQ(sizeof(loupe_rate_args), 8u);
  EXPECT_EQ(offsetof(loupe_rate_args, divisor), 4u);
  EXPECT_EQ(sizeof(loupe_plugin_descriptor), 128u);
}

TEST(AbiLayout, EnumValuesArePinned) {
  EXPECT_EQ(LOUPE_OK, 0);
  EXPECT_EQ(LOUPE_ERR_AGAIN, 8);
  EXPECT_EQ(LOUPE_RECORD_HISTOGRAM, 1);
  EXPECT_EQ(LOUPE_RECORD_HEALTH, 5);
  EXPECT_EQ(LOUPE_RECORD_FINDING, 6);
  EXPECT_EQ(LOUPE_CFG_TABLE_LIST, 7);
  EXPECT_EQ(LOUPE_KIND_PROFILER, 1);
  EXPECT_EQ(LOUPE_KIND_SINK, 2);
  EXPECT_EQ(LOUPE_BP_COUNT_ONLY, 3);
  EXPECT_EQ(LOUPE_RING_MUST_KEEP, 3);
  EXPECT_EQ(LOUPE_UNRESOLVED_NOT_ATTEMPTED, 19);
}
