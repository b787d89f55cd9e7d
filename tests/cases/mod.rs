//! Test cases shared by the native and the browser test binaries. Each
//! binary runs every case through `all_cases!`, so a case added here runs in
//! both worlds.
#![allow(dead_code)]

pub mod conv;
pub mod dtypes;
pub mod engine;
pub mod expressions;
pub mod failures;
pub mod gradients;
pub mod honesty;
pub mod host;
pub mod indexing;
pub mod layers;
pub mod numerics;
pub mod onnx;
pub mod training;

/// Every case, as `$run!(module, name)`.
#[macro_export]
macro_rules! all_cases {
    ($run:ident) => {
        $run!(numerics, the_op_that_makes_a_non_finite_value_from_finite_operands_is_the_root);
        $run!(numerics, a_product_or_a_sum_that_overflows_is_the_root);
        $run!(numerics, a_mean_whose_sum_would_overflow_reads_finite_as_tf_js_divides_first);
        $run!(numerics, an_average_pool_whose_window_sum_would_overflow_reads_finite);
        $run!(numerics, a_users_non_finite_values_pass_through_without_blaming_an_op);
        $run!(numerics, a_max_pool_window_wholly_in_the_padding_fails_with_the_checks_on);
        $run!(numerics, a_nan_propagates_through_exp_max_min_clamp_relu_sigmoid_tanh_and_softmax_and_a_max_pool_ignores_it);
        $run!(numerics, sin_and_cos_are_within_2e_7_for_every_finite_argument_in_kernels_as_on_the_host);
        $run!(numerics, tan_on_the_host_is_the_float64_tangent_rounded_and_in_kernels_the_quotient_of_sin_and_cos);
        $run!(numerics, tan_fuses_with_its_neighbours_refuses_ints_and_fails_alone_under_a_fault);
        $run!(numerics, with_the_checks_off_a_non_finite_value_reads_as_a_value);
        $run!(numerics, log_sqrt_and_rsqrt_give_ieee_values_at_zero_below_it_at_infinity_and_at_nan);
        $run!(numerics, in_random_chains_every_tensor_below_the_breaking_op_fails_at_it_and_the_rest_read);
        $run!(numerics, ops_whose_operands_bounds_prove_them_finite_are_not_checked_and_the_rest_are);
        $run!(numerics, a_report_from_the_host_gives_the_operands_values_where_the_op_went_non_finite);
        $run!(numerics, quotients_by_zero_and_powers_of_zero_read_their_ieee_values_on_every_path);
        $run!(numerics, pow_gives_what_js_math_pow_does_at_nan_and_infinity_on_every_path);
        $run!(
            numerics,
            a_zero_s_sign_from_relu_maximum_minimum_and_clamp_is_what_js_and_tf_js_give_on_every_path
        );
        $run!(
            numerics,
            a_product_holding_a_zero_is_zero_however_far_the_rest_overflows_and_nan_with_an_infinity
        );
        $run!(numerics, a_reduction_of_what_a_failed_op_made_is_no_root_of_its_own);
        $run!(
            numerics,
            a_checked_op_runs_as_its_reductions_prologue_and_the_reduction_checks_what_it_writes
        );
        $run!(training, a_diverging_step_fails_whole_with_the_checks_on_and_poisons_the_weights_without);
        $run!(training, a_step_on_a_nan_the_page_gave_changes_nothing_with_skip_non_finite);
        $run!(training, a_checked_training_loop_compiles_no_kernel_after_its_unchecked_twin_stops);
        $run!(
            training,
            an_optimizer_stepped_on_one_device_refuses_another_naming_the_method_called
        );
        $run!(training, a_training_loop_without_products_compiles_nothing_after_its_first_step);
        $run!(training, a_warmup_compiles_a_training_step_runs_nothing_and_changes_no_variable);
        $run!(training, a_failed_steps_cost_read_after_later_steps_keeps_its_whole_chain);
        $run!(conv, conv2d_matches_the_reference_for_every_padding_stride_dilation_and_format);
        $run!(conv, convolutions_of_channels_in_fours_and_their_gradients_match_the_reference);
        $run!(conv, a_conv2d_with_its_bias_and_relu_is_one_kernel);
        $run!(
            conv,
            a_depthwise_conv2d_with_its_bias_and_relu_is_one_kernel_and_each_gradient_another
        );
        $run!(conv, conv1d_and_conv2d_transpose_match_the_reference);
        $run!(conv, conv2d_gradients_for_images_and_filter_match_finite_differences);
        $run!(conv, conv2d_refuses_bad_calls_and_queues_nothing);
        $run!(conv, depthwise_conv2d_matches_the_reference_for_every_padding_stride_dilation_and_format);
        $run!(conv, depthwise_conv2d_gradients_for_images_and_filter_match_finite_differences);
        $run!(layers, moments_and_batch_norm_match_the_reference_and_normalize_per_channel);
        $run!(layers, batch_norm_gradients_reach_every_input_as_finite_differences_say);
        $run!(layers, dropout_zeroes_at_the_rate_scales_the_rest_and_repeats_with_its_seed);
        $run!(layers, resizes_match_tfjs_for_every_corner_mode_up_and_down);
        $run!(
            layers,
            a_resize_past_what_the_host_can_index_is_refused_and_the_device_goes_on
        );
        $run!(layers, resize_gradients_are_the_adjoint_of_the_resize);
        $run!(conv, max_pool_and_avg_pool_match_the_reference_for_every_padding_and_stride);
        $run!(conv, a_pool_computes_the_elementwise_ops_it_reads_in_its_own_kernel);
        $run!(conv, pool_gradients_go_to_the_first_maximum_and_share_the_mean);
        $run!(conv, a_convolution_past_the_buffer_limits_fails_as_allocation_naming_it_and_nothing_else);
        $run!(
            indexing,
            gather_reads_computed_tables_and_indices_of_any_shape_a_flush_makes
        );
        $run!(
            indexing,
            top_k_gives_the_largest_values_first_with_their_indices_and_gradient
        );
        $run!(indexing, top_k_takes_a_nan_as_the_largest_and_never_repeats_an_index);
        $run!(indexing, cumsum_runs_along_any_axis_exclusive_and_reversed_with_its_gradient);
        $run!(indexing, cumprod_and_prod_multiply_in_order_and_prod_s_gradient_is_exact_at_zeros);
        $run!(indexing, a_scan_computes_the_elementwise_ops_it_reads_in_its_own_kernel);
        $run!(indexing, multinomial_draws_classes_by_their_probabilities_reproducibly);
        $run!(indexing, a_class_of_probability_zero_is_never_drawn_even_first_or_at_seed_0);
        $run!(indexing, gather_reads_slices_along_any_axis_and_batch_dims_as_tf_js_does);
        $run!(indexing, an_index_outside_the_table_fails_its_gather_and_what_reads_it_naming_the_index);
        $run!(indexing, a_gather_and_the_elementwise_ops_reading_it_are_one_kernel);
        $run!(indexing, the_gradient_of_gather_sums_into_the_rows_it_read);
        $run!(
            indexing,
            the_gradient_of_a_gather_past_its_table_fails_as_index_and_a_step_on_it_changes_nothing
        );
        $run!(
            indexing,
            a_gather_s_gradient_and_a_segment_sum_whose_one_hot_passes_a_binding_sum_in_slices
        );
        $run!(
            indexing,
            a_gather_from_an_axis_of_length_one_has_a_gradient_and_one_segment_or_one_value_works
        );
        $run!(indexing, unsorted_segment_sum_adds_slices_by_segment_and_drops_ids_outside);
        $run!(indexing, gather_and_segment_sums_refuse_bad_calls_and_queue_nothing);
        $run!(dtypes, int32_values_are_exact_end_to_end_through_uploads_views_cat_and_reads);
        $run!(dtypes, int32_arithmetic_wraps_and_divides_as_tf_js_does);
        $run!(dtypes, float_mod_and_floor_div_round_toward_negative_infinity);
        $run!(dtypes, a_float_floor_div_is_exact_at_multiples_on_a_fresh_device);
        $run!(
            numerics,
            a_row_holding_infinity_is_nan_through_log_sum_exp_softmax_and_log_softmax
        );
        $run!(
            numerics,
            a_softmax_whose_shifted_values_pass_the_float_limit_reads_its_exact_zeros_with_the_checks_on
        );
        $run!(
            numerics,
            floor_takes_whole_numbers_down_and_keeps_nan_infinities_and_large_values
        );
        $run!(
            numerics,
            floor_fuses_with_its_neighbours_takes_bools_and_fails_alone_under_a_fault
        );
        $run!(dtypes, float_mod_is_exact_at_any_quotient_and_stays_within_the_divisor);
        $run!(dtypes, comparisons_give_bools_and_logical_ops_and_where_take_them);
        $run!(dtypes, mixing_dtypes_upcasts_as_tf_js_does);
        $run!(dtypes, casts_truncate_saturate_and_map_nan_to_zero);
        $run!(dtypes, reductions_of_ints_stay_ints_and_mean_is_a_float);
        $run!(dtypes, arg_max_and_arg_min_give_int32_indices_the_first_on_ties);
        $run!(dtypes, float_only_ops_and_logical_ops_refuse_the_wrong_dtype_and_queue_nothing);
        $run!(dtypes, gradients_pass_through_casts_from_floats_and_never_reach_an_int);
        $run!(dtypes, an_int_chain_fused_with_float_ops_is_one_kernel);
        $run!(dtypes, a_fault_in_a_cast_fails_only_what_reads_it);
        $run!(
            dtypes,
            one_hot_encodes_int32_indices_as_tf_js_does_and_fuses_with_what_reads_it
        );
        $run!(
            host,
            a_thousand_ops_on_sixteen_given_values_run_on_the_host_without_a_kernel_a_buffer_or_a_pipeline
        );
        $run!(
            host,
            a_value_the_host_made_is_uploaded_once_when_a_kernel_reads_it
        );
        $run!(
            host,
            a_fault_injected_into_a_small_block_fails_its_kernel_and_the_rest_runs_on_the_host
        );
        $run!(host, the_host_computes_every_elementwise_op_as_the_kernels_do);
        $run!(host, a_shape_computed_from_given_values_reads_synchronously_without_a_kernel);
        $run!(
            host,
            a_synchronous_read_of_gpu_work_answers_nothing_and_a_read_after_it_gets_the_values
        );
        $run!(host, a_synchronous_read_of_a_tensor_that_failed_on_the_host_gives_its_failure);
        $run!(host, joins_and_folds_on_the_host_match_the_kernels);
        $run!(
            expressions,
            a_held_update_of_a_matmul_product_is_computed_in_the_matmuls_epilogue
        );
        $run!(
            host,
            a_long_chain_on_hundreds_of_values_runs_as_a_kernel_past_the_hosts_work_bound
        );
        $run!(
            host,
            a_host_value_moves_to_a_second_device_and_mixing_devices_is_still_refused
        );
        $run!(
            host,
            a_value_the_host_holds_rejects_with_the_loss_once_its_device_is_lost
        );
        $run!(engine, the_first_slice_adds_and_scales_on_the_gpu);
        $run!(
            engine,
            a_profile_lists_each_kernel_with_its_fused_ops_tensors_and_wgsl
        );
        $run!(training, each_optimizer_applies_the_update_rule_of_tf_js);
        $run!(training, an_mlp_learns_xor_with_each_optimizer);
        $run!(
            training,
            an_mlp_learns_a_three_arm_spiral_with_each_optimizer
        );
        $run!(
            training,
            a_failed_step_changes_no_variable_nor_moment_and_the_next_step_runs_normally
        );
        $run!(
            training,
            steps_flushed_on_top_of_a_failed_step_fail_whole_and_leave_the_weights_of_the_steps_that_ran
        );
        $run!(
            training,
            an_evaluation_run_before_a_failed_steps_failure_is_known_fails_with_it_and_one_after_reads_the_unchanged_weights
        );
        $run!(
            training,
            a_lost_device_refuses_the_step_and_training_resumes_on_a_new_device
        );
        $run!(
            training,
            a_training_loop_compiles_and_allocates_nothing_after_warm_up_and_keeps_memory_flat
        );
        $run!(
            training,
            variables_copy_their_values_refuse_bad_assignments_and_list_the_trainable_ones
        );
        $run!(
            training,
            an_int32_variable_is_left_out_of_a_default_step_and_refused_by_name_in_a_var_list
        );
        $run!(
            training,
            a_step_without_a_var_list_trains_the_variables_its_value_reads_whatever_other_devices_hold
        );
        $run!(gradients, a_dy_of_another_device_or_of_ints_or_bools_is_refused);
        $run!(
            gradients,
            a_failure_in_the_forward_pass_reaches_the_value_and_the_gradients
        );
        $run!(
            gradients,
            every_unary_op_has_the_gradient_of_finite_differences
        );
        $run!(
            gradients,
            random_programs_of_smooth_ops_have_the_gradients_of_finite_differences
        );
        $run!(
            gradients,
            binary_ops_sum_their_gradients_over_broadcast_axes
        );
        $run!(
            gradients,
            scalar_operands_clamp_and_where_have_their_gradients
        );
        $run!(
            gradients,
            the_gradient_of_pow_by_its_exponent_is_zero_where_the_base_is_not_positive
        );
        $run!(
            gradients,
            reductions_with_and_without_keep_dims_have_their_gradients
        );
        $run!(
            gradients,
            matmul_2d_and_batched_with_a_broadcast_operand_has_its_gradients
        );
        $run!(
            gradients,
            views_cat_stack_and_softmax_pass_their_gradients
        );
        $run!(
            gradients,
            log_sum_exp_and_softmax_keep_their_gradients_for_values_far_from_zero
        );
        $run!(
            gradients,
            an_mlp_loss_has_the_gradients_of_finite_differences_and_an_unused_input_gets_zeros
        );
        $run!(
            expressions,
            a_long_repeating_chain_of_clamps_wheres_and_tensor_operands_matches_the_cpu
        );
        $run!(
            expressions,
            a_16_op_chain_with_every_intermediate_held_launches_one_kernel_and_allocates_one_buffer
        );
        $run!(
            expressions,
            a_thousand_held_ops_on_one_tensor_launch_one_kernel_per_iteration_and_create_no_buffer_after_the_first
        );
        $run!(
            expressions,
            an_mlp_forward_with_its_pre_activations_held_launches_one_kernel_per_layer
        );
        $run!(
            expressions,
            a_temporary_of_a_failed_read_keeps_no_failure_once_the_result_is_dropped
        );
        $run!(
            expressions,
            a_momentum_loop_without_tidy_computes_the_same_ops_every_step
        );
        $run!(
            expressions,
            a_chain_of_ten_thousand_held_ops_is_cut_into_kernels_the_device_compiles
        );
        $run!(
            engine,
            a_chain_of_16_elementwise_ops_launches_one_kernel_and_allocates_one_buffer
        );
        $run!(
            engine,
            an_intermediate_read_after_the_result_is_computed_inline_by_one_more_kernel
        );
        $run!(
            engine,
            a_repeated_loop_compiles_pipelines_in_its_first_iteration_only
        );
        $run!(
            engine,
            a_loop_generates_its_kernels_once_and_blocks_that_differ_get_their_own
        );
        $run!(engine, messages_write_numbers_as_javascript_does_in_both_worlds);
        $run!(
            engine,
            a_product_at_ever_new_sizes_compiles_at_most_five_pipelines_and_stays_right
        );
        $run!(engine, a_warmup_fails_only_what_its_function_made_and_consumes_no_fault);
        $run!(
            engine,
            a_loop_whose_scalars_change_compiles_its_kernel_at_most_twice
        );
        $run!(
            engine,
            a_block_at_another_place_in_a_later_flush_reuses_its_pipeline
        );
        $run!(
            engine,
            scalars_keep_their_exact_bits_including_non_finite_ones
        );
        $run!(
            engine,
            a_repeated_loop_creates_no_gpu_buffer_after_its_first_iteration_uniforms_and_staging_included
        );
        $run!(engine, the_queue_flushes_by_itself_at_its_capacity);
        $run!(engine, disposed_tensors_return_their_memory_to_the_pool);
        $run!(engine, creation_ops_fill_arange_and_seeded_random_values);
        $run!(
            engine,
            binary_ops_broadcast_numpy_style_with_tensors_and_numbers
        );
        $run!(engine, reductions_over_one_several_or_all_axes);
        $run!(engine, reductions_fold_to_the_same_values_with_and_without_subgroups);
        $run!(engine, softmax_and_log_softmax_normalise_along_the_axis);
        $run!(engine, matmul_multiplies_2d_and_broadcast_batches);
        $run!(
            engine,
            views_read_through_index_maps_and_copy_only_when_asked_to_reshape_strided_memory
        );
        $run!(engine, a_slice_of_short_lists_and_a_squeeze_of_no_axes_read_as_in_tfjs);
        $run!(engine, cat_and_stack_join_tensors_along_an_axis);
        $run!(engine, empty_tensors_and_scalars_compute_like_any_other);
        $run!(
            engine,
            a_tensor_of_two_to_the_25_elements_is_computed_with_a_split_dispatch
        );
        $run!(
            engine,
            invalid_registrations_name_the_op_the_operands_and_queue_nothing
        );
        $run!(
            engine,
            ops_on_tensors_of_different_devices_are_refused_at_registration
        );
        $run!(
            engine,
            a_sum_of_ten_distinct_inputs_is_split_across_kernels_that_fit_the_binding_limit
        );
        $run!(
            engine,
            reductions_over_leading_axes_run_one_thread_per_column_and_match_the_cpu
        );
        $run!(engine, log_sum_exp_is_stable_for_large_values_and_long_rows);
        $run!(
            engine,
            softmax_runs_in_one_kernel_along_rows_and_log_softmax_in_two
        );
        $run!(
            engine,
            softmax_of_large_inputs_is_exact_to_float32_along_every_axis
        );
        $run!(
            engine,
            matmul_reads_transposed_operands_in_place_with_their_gradients
        );
        $run!(
            engine,
            split_cuts_an_axis_into_views_by_count_or_sizes_and_refuses_what_does_not_fit
        );
        $run!(
            engine,
            pad_and_tile_match_the_cpu_pass_their_gradients_and_refuse_what_does_not_fit
        );
        $run!(
            engine,
            band_part_keeps_the_band_of_each_matrix_with_its_gradient
        );
        $run!(
            engine,
            the_new_shape_ops_fail_only_their_dependents_and_refuse_a_second_devices_operand
        );
        $run!(
            engine,
            matmul_reads_aligned_operands_four_floats_at_a_time_and_any_others_one_by_one
        );
        $run!(engine, a_large_matmul_with_ragged_edges_matches_the_cpu);
        $run!(engine, a_large_aligned_matmul_and_its_transposed_form_match_the_cpu_everywhere);
        $run!(engine, a_batch_of_products_on_the_wide_tiles_matches_the_cpu_everywhere);
        $run!(engine, products_of_operands_stored_either_way_match_the_cpu_on_every_kernel);
        $run!(
            engine,
            an_mlp_layer_is_one_matmul_kernel_with_its_bias_and_activation_as_epilogue
        );
        $run!(
            engine,
            a_transposed_matmul_operand_is_read_in_place_and_allocates_nothing
        );
        $run!(engine, a_reduction_of_an_elementwise_chain_is_one_kernel);
        $run!(
            failures,
            the_tensor_of_a_failed_op_rejects_after_its_failure_was_reported_downstream
        );
        $run!(
            failures,
            the_seed_scenario_fails_only_the_huge_tensor_and_says_why
        );
        $run!(
            failures,
            a_gpu_reported_failure_leaves_independent_work_of_the_same_flush_intact
        );
        $run!(
            failures,
            work_flushed_before_a_failing_submit_resolves_reads_what_its_replay_wrote
        );
        $run!(
            failures,
            a_fused_kernel_still_writes_the_outputs_that_do_not_depend_on_a_failure
        );
        $run!(
            failures,
            a_chain_of_ten_ops_below_a_failure_reports_depth_ten
        );
        $run!(
            failures,
            three_hundred_skips_leave_an_early_tensor_its_whole_chain_and_name_the_dropped_records
        );
        $run!(
            failures,
            two_failures_reaching_one_tensor_are_each_reported_once
        );
        $run!(
            failures,
            disposing_every_tainted_tensor_releases_every_failure_and_every_byte
        );
        $run!(
            failures,
            a_loop_that_reads_a_failed_tensor_and_what_reads_it_holds_no_failure_once_both_are_disposed
        );
        $run!(
            failures,
            a_refused_block_and_what_reads_it_hold_no_failure_once_disposed_without_a_sync
        );
        $run!(
            failures,
            a_lost_device_fails_every_read_and_registration_and_a_new_device_works
        );
        $run!(
            failures,
            moving_a_tainted_tensor_carries_its_failure_to_the_other_device
        );
        $run!(
            failures,
            captured_stacks_name_the_line_that_registered_the_root_op
        );
        $run!(
            honesty,
            a_matmul_and_four_held_elementwise_ops_after_it_read_correctly
        );
        $run!(
            honesty,
            every_block_kind_with_many_inputs_and_held_outputs_fits_the_binding_limit
        );
        $run!(
            honesty,
            operands_on_another_device_are_refused_even_when_they_agree_with_each_other
        );
        $run!(
            honesty,
            work_past_32_bit_indices_fails_as_index_range_instead_of_computing_a_wrong_value
        );
        $run!(
            honesty,
            a_read_of_a_huge_strided_view_fails_as_an_allocation_before_any_gpu_call
        );
        $run!(
            honesty,
            a_failure_taints_only_what_depends_on_the_failed_op_whatever_was_fused_with_it
        );
        $run!(
            honesty,
            a_lost_device_fails_every_pending_read_promptly_and_a_new_device_works
        );
        $run!(
            honesty,
            a_long_training_like_loop_with_a_failing_step_every_tenth_keeps_memory_flat
        );
        $run!(
            honesty,
            log_softmax_of_inputs_near_ten_thousand_keeps_float32_precision
        );
        $run!(
            honesty,
            a_fault_on_an_op_that_was_skipped_leaves_its_fused_neighbour_written
        );
        $run!(
            honesty,
            ops_queued_when_a_device_is_lost_carry_the_loss_not_an_older_failure
        );
        $run!(
            honesty,
            an_intermediate_read_twice_by_one_op_still_fuses_into_the_reduction
        );
        $run!(onnx, the_comparison_is_assert_allclose_at_float32s_tolerance);
        $run!(
            onnx,
            onnx_backend_node_tests_of_the_op_set_match_within_float32s_tolerance
        );
    };
}
