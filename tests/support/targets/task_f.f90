! A Fortran application using the adaptyst_task module: waits for a line on stdin,
! then runs 25 spmv tasks and exits.
program task_f
    use, intrinsic :: iso_c_binding
    use adaptyst_task
    implicit none
    type(adaptyst_task_t) :: t
    character(len=16) :: go
    integer :: i
    real(c_double) :: x
    read (*, '(A)') go
    x = 0
    do i = 1, 25
        call adaptyst_task_begin(t, "spmv"//c_null_char, "cpu"//c_null_char, &
                                 3000000_c_long_long, 0.001_c_double)
        call busy(x)
        call adaptyst_task_end(t)
    end do
    if (x < 0) print *, x
contains
    subroutine busy(acc)
        real(c_double), intent(inout) :: acc
        integer :: k
        do k = 1, 20000
            acc = acc + sqrt(real(k, c_double))
        end do
    end subroutine busy
end program task_f
