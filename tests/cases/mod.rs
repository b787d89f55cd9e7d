//! Test cases shared by the native and the browser test binaries; each
//! binary lists them with `cases!`, so a case added here runs in both worlds.
#![allow(dead_code)]

pub mod engine;

/// The engine cases, by name: `$run!(name)` for each.
#[macro_export]
macro_rules! engine_cases {
    ($run:ident) => {
        $run!(the_first_slice_adds_and_scales_on_the_gpu);
        $run!(a_chain_of_16_elementwise_ops_launches_one_kernel_and_allocates_one_buffer);
        $run!(two_live_outputs_of_a_fused_chain_still_launch_one_kernel);
        $run!(a_repeated_loop_stops_compiling_pipelines_after_its_first_iteration);
        $run!(the_queue_flushes_by_itself_at_its_capacity);
        $run!(disposed_tensors_return_their_memory_to_the_pool);
        $run!(creation_ops_fill_arange_and_seeded_random_values);
        $run!(binary_ops_broadcast_numpy_style_with_tensors_and_numbers);
        $run!(reductions_over_one_several_or_all_axes);
        $run!(softmax_and_log_softmax_normalise_along_the_axis);
        $run!(matmul_multiplies_2d_and_broadcast_batches);
        $run!(views_read_through_index_maps_and_copy_only_when_asked_to_reshape_strided_memory);
        $run!(cat_and_stack_join_tensors_along_an_axis);
        $run!(empty_tensors_and_scalars_compute_like_any_other);
        $run!(a_tensor_of_two_to_the_25_elements_is_computed_with_a_split_dispatch);
        $run!(invalid_registrations_name_the_op_the_operands_and_queue_nothing);
        $run!(ops_on_tensors_of_different_devices_are_refused_at_registration);
    };
}
